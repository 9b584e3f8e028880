<?php

/**
 * A /metrics route for Prometheus: the circuits of the Ganesha configured in
 * status/ganesha.php, and the figures of the shared-memory store, in the text exposition
 * format (SlidingTimeWindowShm::metrics()). Read-only: scraping never claims a half-open trial.
 *
 * Served by the application as its front script for /metrics (nginx + php-fpm:
 * `location = /metrics { include fastcgi_params; fastcgi_param SCRIPT_FILENAME /path/to/metrics.php; ... }`),
 * or, for the demo, by PHP's built-in server through status/router.php.
 *
 * Each php-fpm master has a segment of its own: scrape every master (every server, every pool
 * started on its own) to see all of them.
 *
 *   scrape_configs:
 *     - job_name: ganesha
 *       static_configs: [{targets: ['app-1:8080', 'app-2:8080']}]
 */

declare(strict_types=1);

try {
    ['adapter' => $adapter] = require __DIR__ . '/status/ganesha.php';
    $body = $adapter->metrics();
} catch (Throwable $e) {
    http_response_code(500);
    header('Content-Type: text/plain; charset=utf-8');
    echo 'ganesha_shm metrics unavailable: ', $e->getMessage(), "\n";

    return;
}

header('Content-Type: text/plain; version=0.0.4; charset=utf-8');
header('Cache-Control: no-store');
echo $body;
