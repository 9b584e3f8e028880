<?php

/**
 * Workload (a) of the benchmark, a healthy service (isAvailable() then success()), run a fixed
 * number of times over one adapter, for valgrind's callgrind: see benches/profile.sh. Workload
 * (e), a request as php-fpm serves one, builds a new adapter and Ganesha for every cycle.
 *
 *   php -d extension=target/release/libganesha_shm.so benches/profile.php shm|floor|apcu CYCLES [a|e]
 *
 * `refuse` instead fills the store (run it with ganesha_shm.max_services=1) and makes CYCLES
 * increments of new keys, each refused with Ganesha's StorageException, caught.
 */

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Benches;

use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Storage\Adapter\Apcu;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

$adapterId = $argv[1] ?? 'shm';
$cycles = (int) ($argv[2] ?? 10000);
$workload = $argv[3] ?? 'a';

$ganeshaMissing = require \dirname(__DIR__) . '/tests/autoload.php';
if ($ganeshaMissing !== null) {
    \fwrite(\STDERR, "profile: workload (a) needs Ganesha: {$ganeshaMissing}\n");
    exit(1);
}
require __DIR__ . '/NullAdapter.php';

$newAdapter = match ($adapterId) {
    'shm', 'refuse' => static fn () => new SlidingTimeWindowShm(),
    'floor' => static fn () => new NullAdapter(),
    'apcu' => static fn () => new Apcu(),
    default => throw new \InvalidArgumentException("unknown adapter {$adapterId}: shm, floor, apcu or refuse"),
};
$build = static fn (object $adapter) => Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow(60)
    ->failureRateThreshold(50)
    ->minimumRequests(10)
    ->intervalToHalfOpen(5)
    ->build();
$adapter = $newAdapter();
$ganesha = $build($adapter);

if ($adapterId === 'refuse') {
    // Every counter slot taken, then one refused call first, as below.
    for ($i = 0; $i < 3 * (int) \ini_get('ganesha_shm.max_services'); ++$i) {
        $adapter->increment("ganesha_taken{$i}_failure");
    }
    for ($i = -1; $i < $cycles; ++$i) {
        try {
            $adapter->increment("ganesha_new{$i}_failure");
        } catch (\RuntimeException) {
        }
    }

    return;
}

$service = 'profile-service';
// One cycle first, so that every run pays the same one-time costs (class loading, first write).
$ganesha->isAvailable($service) && $ganesha->success($service);
if ($workload === 'e') {
    for ($i = 0; $i < $cycles; ++$i) {
        $ganesha = $build($newAdapter());
        if ($ganesha->isAvailable($service)) {
            $ganesha->success($service);
        }
    }

    return;
}
for ($i = 0; $i < $cycles; ++$i) {
    if ($ganesha->isAvailable($service)) {
        $ganesha->success($service);
    }
}
