<?php

/**
 * The status page's router (examples/status/router.php), with one addition for the tests:
 * `hold_ms=N` in the query string keeps the worker serving the request busy for N ms (at most
 * 5,000) before the request is served, so that a request sent meanwhile is served by another
 * worker. PHP's built-in server does not say which worker accepts a connection: on PHP 8.4
 * one idle worker may take every request sent one after another.
 */

declare(strict_types=1);

$holdMs = filter_var($_GET['hold_ms'] ?? 0, FILTER_VALIDATE_INT, ['options' => ['min_range' => 0, 'max_range' => 5000]]);
if ($holdMs !== false && $holdMs > 0) {
    usleep($holdMs * 1000);
}

return require dirname(__DIR__, 3) . '/examples/status/router.php';
