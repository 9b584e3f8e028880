<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Zeusi\GaneshaShmAdapter\Tests\Support\HalfOpenRaces;

/**
 * One half-open trial per interval across the children of an Apache parent: 16 children, held
 * at a barrier, ask at the same instant whether a tripped service may be called, after the
 * interval to half-open passed; exactly one is let through, every round (HalfOpenRaces, as the
 * fpm suite races php-fpm's workers).
 *
 * The requests give Ganesha and the adapter a fixed time (the tests' VirtualClock, through the
 * query), so that no second trial can become due while the round runs, however slow the
 * machine: the children race for real; only the time they read is set by the test.
 */
final class HalfOpenRaceTest extends ApacheTestCase
{
    use HalfOpenRaces;

    private const CHILDREN = 16;

    public function testOneGaneshaTrialAmongSixteenConcurrentRequests(): void
    {
        self::requireGanesha();
        $server = $this->startApache(startServers: self::CHILDREN, maxRequestWorkers: self::CHILDREN);

        self::assertOneGaneshaTrialPerRound($server, self::atOnce($server), 'children');
    }

    public function testOneNativeTrialAmongSixteenConcurrentRequests(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN, maxRequestWorkers: self::CHILDREN);

        self::assertOneNativeTrialPerRound($server, self::atOnce($server), 'children');
    }

    /** @return \Closure(string, array<string, scalar|list<string>>): array<int, array<string, mixed>> */
    private static function atOnce(ApacheServer $server): \Closure
    {
        return static fn (string $script, array $query): array => self::everyChild($server, $script, $query, self::CHILDREN);
    }
}
