<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

use Ackintosh\Ganesha;

/**
 * The half-open races of the web suites (tests/Fpm/HalfOpenRaceTest.php,
 * tests/Apache/HalfOpenRaceTest.php), for a ServerTestCase: 5 rounds, in each of which a
 * service is tripped, then every process of the server, held at a barrier, asks at the same
 * instant whether it may be called, after the interval to half-open passed; exactly one is let
 * through, every round.
 *
 * The requests give Ganesha and the adapter a fixed time (the tests' VirtualClock, through the
 * query), so that no second trial can become due while the round runs, however slow the
 * machine: the processes race for real; only the time they read is set by the test.
 */
trait HalfOpenRaces
{
    /**
     * The real Ganesha, built by each request over SlidingTimeWindowShm: tripped by 2 failures,
     * intervalToHalfOpen 5 s; every process asks 6 s after the trip; one is let through, the
     * trial restarts the interval, the others are rejected, and no second trial follows.
     *
     * @param object $server the server's json() (FpmServer, ApacheServer)
     * @param \Closure(string, array<string, scalar|list<string>>): array<int, array<string, mixed>> $atOnce
     *     sends the request (script, query) to every process of the server at once, through a
     *     barrier, and returns the answers keyed by pid
     * @param string $processes what the server's processes are called (workers, children)
     */
    private static function assertOneGaneshaTrialPerRound(object $server, \Closure $atOnce, string $processes): void
    {
        $rounds = 5;
        $interval = 5;
        $tripAt = \time();
        $later = $tripAt + $interval + 1;

        for ($round = 0; $round < $rounds; ++$round) {
            $circuit = ['service' => Unique::name('race.'), 'window' => 60, 'minimum' => 2, 'interval' => $interval];
            $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            $tripped = $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events'], "round {$round}: tripped");
            self::assertFalse($server->json(self::ganesha(), ['op' => 'available', 'now' => $tripAt] + $circuit)['available'], "round {$round}: open");

            $answers = $atOnce(self::ganesha(), ['op' => 'available', 'now' => $later] + $circuit);

            $admitted = \array_keys(\array_filter(\array_column($answers, 'available', 'pid')));
            self::assertCount(1, $admitted, "round {$round}: {$processes} let through");
            self::assertSame([], \array_merge(...\array_column($answers, 'events')), "round {$round}: no event");
            $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot', 'now' => $later] + $circuit)['snapshot'];
            self::assertSame(
                [$later, 1 + \count($answers) - 1],
                [$snapshot['last_failure_time'], $snapshot['rejections']],
                "round {$round}: the trial restarted the interval; the other {$processes} were rejected"
            );
            self::assertFalse($server->json(self::ganesha(), ['op' => 'available', 'now' => $later] + $circuit)['available'], "round {$round}: no second trial");
        }
    }

    /**
     * The native class: a last failure time stored, then every process claims the trial at
     * once, 6 s later with an interval of 5 s; one is given the stored time (the trial), the
     * others the time it claimed.
     *
     * @param object $server the server's json() (FpmServer, ApacheServer)
     * @param \Closure(string, array<string, scalar|list<string>>): array<int, array<string, mixed>> $atOnce
     *     as for assertOneGaneshaTrialPerRound()
     * @param string $processes what the server's processes are called (workers, children)
     */
    private static function assertOneNativeTrialPerRound(object $server, \Closure $atOnce, string $processes): void
    {
        $rounds = 5;
        $interval = 5;
        $failedAt = \time();
        $later = $failedAt + $interval + 1;

        for ($round = 0; $round < $rounds; ++$round) {
            $key = Unique::name('race_') . '_failure';
            $server->json(self::native(), ['op' => 'save_last_failure_time', 'key' => $key, 'time' => $failedAt, 'now' => $failedAt]);

            $answers = $atOnce(self::native(), ['op' => 'claim', 'key' => $key, 'now' => $later, 'interval' => $interval]);

            $times = \array_count_values(\array_column($answers, 'last_failure_time'));
            \ksort($times);
            self::assertSame([$failedAt => 1, $later => \count($answers) - 1], $times, "round {$round}: one of the {$processes} given the stored time (the trial), the others the time it claimed");
        }
    }
}
