<?php

declare(strict_types=1);

/*
 * Bootstrap of both test suites (see phpunit.xml.dist):
 *  - native:  the extension alone, through a duck-typed context (tests/Support);
 *  - ganesha: the extension behind the real Ganesha circuit breaker, skipped when Ganesha is
 *             not loadable (`composer install`, or GANESHA_DIR=<exported ackintosh/ganesha>).
 *
 * Ganesha's time() is replaced, before any of Ganesha's code runs, by the tests' VirtualClock
 * (tests/Support/VirtualClock.php): the system's time() until a test freezes it.
 *
 * Run: php -d extension=/abs/path/target/release/libganesha_shm.so /path/to/phpunit
 * Child processes some tests start load the extension from GANESHA_SHM_EXT, else from the
 * shared object this process mapped, else from target/release/libganesha_shm.so.
 */

use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

require_once __DIR__ . '/Support/virtual_clock_functions.php';
require_once __DIR__ . '/Support/Autoload.php';

$ganeshaMissing = Autoload::register();

if (!extension_loaded('ganesha_shm')) {
    fwrite(STDERR, sprintf(
        "The ganesha_shm extension is not loaded: build it with `cargo build --release` and run\n"
        . "  %s -d extension=%s %s\n",
        PHP_BINARY,
        Php::findExtension(),
        $_SERVER['argv'][0] ?? 'phpunit'
    ));
    exit(1);
}

define('GANESHA_SHM_EXT', Php::findExtension());

if ($ganeshaMissing !== null) {
    fwrite(STDERR, 'ganesha_shm tests: the "ganesha" suite is SKIPPED: ' . $ganeshaMissing . PHP_EOL);
}
