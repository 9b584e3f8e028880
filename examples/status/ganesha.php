<?php

/**
 * The Ganesha shared by the status page, its JSON endpoint, the demo's traffic helper and the
 * /metrics route (../metrics.php): one configuration, so that they all read the same circuits.
 *
 * The circuits live in the shared-memory segment the ganesha_shm extension created when PHP
 * started: every php-fpm worker of one master, or every worker of `php -S` started with
 * PHP_CLI_SERVER_WORKERS, sees the same ones. snapshot() and metrics() only list the services
 * stored under this configuration's storage keys, so an application serving these pages builds
 * its adapter exactly as its own code does (same strategy, same time window, same key prefix).
 *
 * Returns ['ganesha' => Ganesha, 'adapter' => SlidingTimeWindowShm, 'settings' => array].
 * Throws when the extension or Ganesha is missing; the pages report that as a 500.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

// Class loading: the application's Composer autoloader when this package is installed in its
// vendor/ (vendor/zeusi/ganesha-shm-adapter/examples/status), else this checkout's
// (tests/autoload.php: vendor/ after `composer install`, or Ganesha from GANESHA_DIR).
$vendor = dirname(__DIR__, 4);
if (basename($vendor) === 'vendor' && is_file($vendor . '/autoload.php')) {
    require_once $vendor . '/autoload.php';
} else {
    $ganeshaMissing = require_once dirname(__DIR__, 2) . '/tests/autoload.php';
    if (is_string($ganeshaMissing)) {
        throw new RuntimeException($ganeshaMissing);
    }
}
if (!extension_loaded('ganesha_shm')) {
    throw new RuntimeException(
        'The ganesha_shm extension is not loaded in this PHP: start it with -d extension=/abs/path/libganesha_shm.so '
        . '(php-fpm: add the extension= line to its php.ini)'
    );
}

$settings = [
    'strategy' => 'rate',
    'time_window' => 30,             // seconds over which the failure rate is computed
    'failure_rate_threshold' => 50,  // percent of failures that trips the circuit
    'minimum_requests' => 3,         // requests in the time window before it can trip
    'interval_to_half_open' => 10,   // seconds after the last failure before one trial is let through
];

$adapter = new SlidingTimeWindowShm();
$ganesha = Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow($settings['time_window'])
    ->failureRateThreshold($settings['failure_rate_threshold'])
    ->minimumRequests($settings['minimum_requests'])
    ->intervalToHalfOpen($settings['interval_to_half_open'])
    ->build();

return ['ganesha' => $ganesha, 'adapter' => $adapter, 'settings' => $settings];
