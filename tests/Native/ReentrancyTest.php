<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * User PHP that the adapter runs (the clock callable, Ganesha's Context) may call the adapter
 * back, setContext() included. The adapter must hold no reference into its configuration
 * while that code runs: a call keeps the configuration it started with, and a setContext()
 * made meanwhile takes effect for the next call. Run under valgrind's memcheck, which fails
 * the run on any read of freed memory (the configuration's keys, replaced by the nested
 * setContext()).
 */
final class ReentrancyTest extends TestCase
{
    public function testCallsFromTheClockAndTheContextBackIntoTheAdapterAreSafe(): void
    {
        $run = Php::underMemcheck([__DIR__ . '/scripts/reentrant.php']);
        if ($run === null) {
            self::markTestSkipped('valgrind is not installed (apt-get install valgrind; .ci/install-deps installs it)');
        }
        self::assertSame(0, $run['exit'], "memcheck:\n{$run['stderr']}\n{$run['stdout']}");
        $result = \json_decode($run['stdout'], true, 512, \JSON_THROW_ON_ERROR);
        $service = $result['service'];

        self::assertSame([$service => 1], $result['during_clock'], 'snapshot() read under the configuration it started with');
        self::assertSame([], $result['after_clock'], 'the next call read under the one the clock set');
        self::assertSame([$service => 2], $result['after_nested_set_context'], 'the outer setContext() is the one that holds');
    }
}
