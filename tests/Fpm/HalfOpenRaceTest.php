<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Zeusi\GaneshaShmAdapter\Tests\Support\HalfOpenRaces;

/**
 * One half-open trial per interval across the workers of a php-fpm pool: 16 workers, held at a
 * barrier, ask at the same instant whether a tripped service may be called, after the interval
 * to half-open passed; exactly one is let through, every round (HalfOpenRaces, as the apache
 * suite races Apache's children).
 *
 * The requests give Ganesha and the adapter a fixed time (the tests' VirtualClock, through the
 * query), so that no second trial can become due while the round runs, however slow the
 * machine: the workers race for real; only the time they read is set by the test.
 */
final class HalfOpenRaceTest extends FpmTestCase
{
    use HalfOpenRaces;

    private const WORKERS = 16;

    public function testOneGaneshaTrialPerIntervalAcrossSixteenWorkers(): void
    {
        self::requireGanesha();
        $server = $this->startFpm(maxChildren: self::WORKERS);

        self::assertOneGaneshaTrialPerRound($server, self::atOnce($server), 'workers');
    }

    public function testOneNativeTrialPerIntervalAcrossSixteenWorkers(): void
    {
        $server = $this->startFpm(maxChildren: self::WORKERS);

        self::assertOneNativeTrialPerRound($server, self::atOnce($server), 'workers');
    }

    /** @return \Closure(string, array<string, scalar|list<string>>): array<int, array<string, mixed>> */
    private static function atOnce(FpmServer $server): \Closure
    {
        return static fn (string $script, array $query): array => self::everyWorker($server, $script, $query, self::WORKERS);
    }
}
