<?php

/**
 * The circuits as JSON, for scripts and dashboards: what the status page shows.
 *
 *   {"time": 1700000000, "pid": 1234, "settings": {...},
 *    "services": {"payments": {"service": "payments", "display_name": "payments", "state": "open", ...}},
 *    "store": {...ganesha_shm_info()}}
 *
 * Read-only (SlidingTimeWindowShm::snapshot() never claims the half-open trial). 500 with
 * {"error": "..."} when the circuits cannot be read.
 */

declare(strict_types=1);

header('Content-Type: application/json');
header('Cache-Control: no-store');
try {
    ['adapter' => $adapter, 'settings' => $settings] = require __DIR__ . '/ganesha.php';
    $body = [
        'time' => time(),
        'pid' => getmypid(),
        'settings' => $settings,
        // keyed by display name: JSON holds text, and a service's name may be any bytes
        'services' => (object) array_column($adapter->snapshot(), null, 'display_name'),
        'store' => ganesha_shm_info(),
    ];
} catch (Throwable $e) {
    http_response_code(500);
    $body = ['error' => $e->getMessage()];
}
echo json_encode($body, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
