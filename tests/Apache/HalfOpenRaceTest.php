<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * One half-open trial per interval across the children of an Apache parent: 16 children, held
 * at a barrier, ask at the same instant whether a tripped service may be called, after the
 * interval to half-open passed; exactly one is let through, every round.
 *
 * The requests give Ganesha and the adapter a fixed time (the tests' VirtualClock, through the
 * query), so that no second trial can become due while the round runs, however slow the
 * machine: the children race for real; only the time they read is set by the test.
 */
final class HalfOpenRaceTest extends ApacheTestCase
{
    private const ROUNDS = 5;

    private const CHILDREN = 16;

    private const INTERVAL = 5;

    public function testOneGaneshaTrialAmongSixteenConcurrentRequests(): void
    {
        self::requireGanesha();
        $server = $this->startApache(startServers: self::CHILDREN, maxRequestWorkers: self::CHILDREN);
        $tripAt = \time();
        $later = $tripAt + self::INTERVAL + 1;

        for ($round = 0; $round < self::ROUNDS; ++$round) {
            $circuit = ['service' => Unique::name('race.'), 'window' => 60, 'minimum' => 2, 'interval' => self::INTERVAL];
            $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            $tripped = $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events'], "round {$round}: tripped");
            self::assertFalse($server->json(self::ganesha(), ['op' => 'available', 'now' => $tripAt] + $circuit)['available'], "round {$round}: open");

            $answers = self::everyChild($server, self::ganesha(), ['op' => 'available', 'now' => $later] + $circuit, self::CHILDREN);

            $admitted = \array_keys(\array_filter(\array_column($answers, 'available', 'pid')));
            self::assertCount(1, $admitted, "round {$round}: children let through");
            self::assertSame([], \array_merge(...\array_column($answers, 'events')), "round {$round}: no event");
            $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot', 'now' => $later] + $circuit)['snapshot'];
            self::assertSame(
                [$later, 1 + self::CHILDREN - 1],
                [$snapshot['last_failure_time'], $snapshot['rejections']],
                "round {$round}: the trial restarted the interval; the other children were rejected"
            );
            self::assertFalse($server->json(self::ganesha(), ['op' => 'available', 'now' => $later] + $circuit)['available'], "round {$round}: no second trial");
        }
    }

    public function testOneNativeTrialAmongSixteenConcurrentRequests(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN, maxRequestWorkers: self::CHILDREN);
        $failedAt = \time();
        $later = $failedAt + self::INTERVAL + 1;

        for ($round = 0; $round < self::ROUNDS; ++$round) {
            $key = Unique::name('race_') . '_failure';
            $server->json(self::native(), ['op' => 'save_last_failure_time', 'key' => $key, 'time' => $failedAt, 'now' => $failedAt]);

            $answers = self::everyChild($server, self::native(), ['op' => 'claim', 'key' => $key, 'now' => $later, 'interval' => self::INTERVAL], self::CHILDREN);

            $times = \array_count_values(\array_column($answers, 'last_failure_time'));
            \ksort($times);
            self::assertSame([$failedAt => 1, $later => self::CHILDREN - 1], $times, "round {$round}: one child given the stored time (the trial), the others the time it claimed");
        }
    }
}
