<?php

/**
 * Router for PHP's built-in server: /metrics runs ../metrics.php (the Prometheus route an
 * application would serve), every other path is served from this directory as usual.
 *
 *   PHP_CLI_SERVER_WORKERS=2 php -d extension=/abs/path/libganesha_shm.so \
 *       -S 127.0.0.1:8080 -t examples/status examples/status/router.php
 *
 * With PHP_CLI_SERVER_WORKERS the server forks its workers after PHP started, so they share
 * the extension's segment, as the workers of one php-fpm master do.
 */

declare(strict_types=1);

if (parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH) === '/metrics') {
    require __DIR__ . '/../metrics.php';

    return true;
}

return false;
