<?php

/*
 * Ganesha's time(), replaced by the tests' VirtualClock (see there). Ganesha's strategies call
 * time() unqualified from this namespace, so PHP finds this function before the global one,
 * provided it is defined before the first call: PHP caches which function a call site
 * resolved to. Required by tests/bootstrap.php.
 */

declare(strict_types=1);

namespace Ackintosh\Ganesha\Strategy;

use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

require_once __DIR__ . '/VirtualClock.php';

if (!\function_exists(__NAMESPACE__ . '\\time')) {
    function time(): int
    {
        return VirtualClock::now();
    }
}
