<?php

/*
 * The fpm suite's script of the native class (tests/Fpm/www/native.php), served by mod_php:
 * the same operations, query parameters, barrier and JSON answers (with the pid of the child
 * that served the request), so that both suites check the same things under both SAPIs.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/Fpm/www/native.php';
