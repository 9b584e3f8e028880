<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

/**
 * The fleet as one circuit: what one host does to a service reaches every host.
 */
final class FleetCircuitTest extends FleetTestCase
{
    /**
     * Redis loses everything (FLUSHALL) while a host sees a service only through the fleet: its
     * counts of it are never above what the hosts counted meanwhile, and are exact again once the
     * hosts that count it published it again, the circuit rejecting there all along.
     */
    public function testAServiceSeenOnlyThroughTheFleetIsExactAgainAfterRedisLosesEverything(): void
    {
        [$h1, $h2, $h3] = $this->startHosts();
        $service = self::service('flushed');
        $h1->record($service, 3);
        $h2->record($service, 3);
        $this->waitForSyncs([$h1, $h2, $h3], $this->nowMs());
        self::assertSame([6, true], [self::fleetCounts($h3, $service)['failures'] ?? null, $h3->snapshot()['snapshot'][$service]['fleet']['only'] ?? null]);

        self::assertSame("OK\n", $this->redis->cli(['FLUSHALL'])['stdout']);
        $seen = [];
        $this->waitUntil(function () use ($h3, $service, &$seen): bool {
            $failures = self::fleetCounts($h3, $service)['failures'] ?? 0;
            self::assertLessThanOrEqual(6, $failures, 'never above what the hosts counted');
            $seen[] = $failures;

            return \count($seen) > 1 && $failures === 6 && ($h3->snapshot()['snapshot'][$service]['fleet']['only'] ?? false);
        }, 'the service seen only through the fleet, exact again');
        $this->waitForSyncs([$h1, $h2, $h3], $this->nowMs());
        self::assertSame(6, self::fleetCounts($h3, $service)['failures']);
        self::assertFalse($h3->snapshot()['snapshot'][$service]['admits'], 'rejecting');
        self::report('FLUSHALL: the service seen only through the fleet exact again after ' . \count($seen) . ' views, never above');
    }

    /**
     * Two hosts trip a service between them; a third, which never counted it, rejects it on its
     * very first request, and shows it in snapshot() and metrics() as seen only through the fleet.
     */
    public function testAHostThatNeverCountedAServiceRejectsItOnItsFirstRequestOnceTheFleetTripped(): void
    {
        [$h1, $h2, $h3] = $this->startHosts();
        $service = self::service('unseen');
        $h1->record($service, 3);
        $h2->record($service, 3);
        $this->waitForSyncs([$h1, $h2, $h3], $this->nowMs());

        $row = $h3->snapshot()['snapshot'][$service] ?? null;
        self::assertIsArray($row, "{$h3->name} lists the service it sees through the fleet");
        self::assertSame(['failures' => 0, 'successes' => 0, 'rejections' => 0], self::own($h3, $service));
        self::assertSame([6, true, true, 'open'], [$row['fleet']['failures'], $row['fleet']['decides'], $row['fleet']['only'], $row['state']]);
        self::assertStringContainsString("ganesha_shm_fleet_only{service=\"{$service}\"} 1\n", $h3->ask(['op' => 'metrics'])['metrics']);
        self::assertFalse($h3->available($service), "{$h3->name} rejects on its first request");
        self::assertFalse($h1->snapshot()['snapshot'][$service]['fleet']['only'], 'a host that counts the service');

        // Once it counted (its rejection), the service is its own, the fleet's counts with it.
        $this->waitForSyncs([$h3], $this->nowMs());
        self::assertSame([6, false], [self::fleetCounts($h3, $service)['failures'], $h3->snapshot()['snapshot'][$service]['fleet']['only']]);
        self::assertFalse($h3->available($service));
    }

    /**
     * A host joins a tripped fleet, its PHP not yet run (a new pod: no request has built Ganesha
     * there, so no window is noted): from its sidecar's second sync on, its first requests to
     * the failing service are rejected, not one reaches the service.
     */
    public function testAHostJoiningATrippedFleetSendsNothingToTheFailingService(): void
    {
        $hosts = $this->startHosts();
        $service = self::service('join');
        $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);

        $joining = $this->startHost('h4', self::GANESHA + ['lazy' => true]);
        $this->waitForSyncs([$joining], $this->nowMs(), 3);
        $admitted = 0;
        for ($request = 0; $request < 20; ++$request) {
            $admitted += $joining->ask(['op' => 'trial', 'service' => $service, 'ok' => false])['admitted'] ? 1 : 0;
            \usleep(10_000);
        }
        self::assertSame(0, $admitted, 'requests of the joining host that reached the failing service');
        self::assertSame(20, self::own($joining, $service)['rejections']);
    }

    /**
     * A host with room for 4 services, in a fleet of 12: its fleet-only region keeps the 4 in the most trouble
     * (the 2 tripped first), and its own new service still counts every event and trips.
     */
    public function testAHostWithLittleRoomKeepsItForItsOwnServicesAndSeesTheFleetsInTheMostTrouble(): void
    {
        [$h1, $h2, $small] = $this->startHosts(3, self::GANESHA, ini: ['h3' => ['ganesha_shm.max_services' => 4]]);
        $tripped = [self::service('tripped'), self::service('tripped')];
        foreach ($tripped as $service) {
            $h1->record($service, 6);
            self::assertFalse($h1->available($service), 'tripped on h1 alone, and rejecting');
        }
        for ($i = 0; $i < 10; ++$i) {
            $h2->record(self::service('busy'), 1, 5);
        }
        $this->waitForSyncs([$h1, $h2, $small], $this->nowMs());
        $fleetOnly = \array_keys(\array_filter($small->snapshot()['snapshot'], fn (array $row) => $row['fleet']['only'] ?? false));
        self::assertCount(4, $fleetOnly, 'as many services as its room: ' . \json_encode($fleetOnly));
        foreach ($tripped as $service) {
            self::assertContains($service, $fleetOnly, 'a tripped service is kept first');
        }
        self::assertStringContainsString('the fleet counts 12 services this host has not counted, more than its segment holds for them', $small->sidecar->logText());
        $mine = self::service('mine');
        $small->record($mine, 6);
        self::assertSame(6, self::own($small, $mine)['failures'], 'every event of its own new service counted');
        self::assertFalse($small->available($mine), 'and it trips');
        self::assertSame([], \array_filter($small->events(), fn (array $event) => $event[0] === \Ackintosh\Ganesha::EVENT_STORAGE_ERROR), 'no storage error');
    }

    /**
     * www-data, who may write a host's segment file (its group, ganesha_shm.mode=0660), writes
     * random bytes over the fleet-only region and the tables before it while the host serves
     * requests and its sidecar writes the region: circuits may read wrong meanwhile, but neither
     * PHP nor the sidecar crashes or hangs, and what the sidecar writes next is read right again.
     */
    public function testWhoeverWritesTheSegmentFileOverTheFleetOnlyRegionCrashesNothing(): void
    {
        $user = \posix_getpwnam('www-data');
        if (\posix_geteuid() !== 0 || $user === false || !\is_executable('/usr/sbin/runuser')) {
            self::markTestSkipped('needs root, runuser and a www-data user');
        }
        [$h1, $target] = $this->startHosts(2, self::GANESHA, ini: ['h2' => ['ganesha_shm.mode' => '0660', 'ganesha_shm.max_services' => 4]]);
        $service = self::service('attacked');
        $h1->record($service, 6);
        $this->waitForSyncs([$h1, $target], $this->nowMs());
        self::assertTrue($target->snapshot()['snapshot'][$service]['fleet']['only']);
        \chmod($this->dir, 0711);
        \chgrp($target->segment, $user['gid']);

        // The fleet-only region is the last of the file: its last 40 kB hold it and the tables' end.
        $attack = 'mt_srand(7); $f = fopen($argv[1], "r+"); $size = filesize($argv[1]); $deadline = microtime(true) + 4;'
            . ' for ($n = 0; microtime(true) < $deadline; ++$n) { fseek($f, $size - 40960 + 8 * mt_rand(0, 5119));'
            . ' fwrite($f, $n % 2 ? random_bytes(8) : pack("P", mt_rand(0, 12))); if ($n % 64 === 0) { usleep(1000); } }';
        $attacker = \proc_open(['runuser', '-u', 'www-data', '--', \PHP_BINARY, '-n', '-r', $attack, $target->segment], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        self::assertIsResource($attacker);
        $asked = 0;
        $deadline = \microtime(true) + 4;
        while (\microtime(true) < $deadline) {
            $target->available($service);
            $target->snapshot();
            ++$asked;
        }
        $output = \stream_get_contents($pipes[1]) . \stream_get_contents($pipes[2]);
        self::assertSame(0, \proc_close($attacker), 'the attacker ran as www-data: ' . $output);

        self::assertTrue($target->sidecar->running(), 'the sidecar lives on');
        $this->waitForSyncs([$h1, $target], $this->nowMs());
        // Within a few syncs on a loaded machine: the sidecar writes the region whole at each.
        $this->waitUntil(fn () => (self::fleetCounts($target, $service)['failures'] ?? null) === 6, 'what the sidecar writes next is read right', 10.0);
        self::assertSame(6, self::fleetCounts($target, $service)['failures'] ?? null, "what the sidecar writes next is read right:\n" . $this->logs());
        self::report("www-data wrote over the fleet-only region for 4 s: {$asked} requests and snapshots answered, the counts right again at the next sync");
    }

    /**
     * The fleet trips; an operator mends the dependency and calls resetService() on one host:
     * two syncs later every host admits requests, and what the hosts count after the reset is
     * counted everywhere, not one event of before it.
     */
    public function testResetServiceOnOneHostReachesEveryHostWithinTwoIntervals(): void
    {
        $hosts = $this->startHosts();
        [$operator] = $hosts;
        $service = self::service('reset');
        $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);

        $operator->ask(['op' => 'reset', 'service' => $service]);
        self::assertTrue($operator->available($service), 'the host that reset it admits at once');
        $after = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertTrue($host->available($service), "{$host->name} admits two intervals after the reset");
            self::assertSame(0, self::own($host, $service)['failures'] ?? 0, "{$host->name}: its failures before the reset are gone");
            self::assertSame(0, self::fleetCounts($host, $service)['failures'], "{$host->name}: the fleet's too");
        }
        self::report("every host available {$after} ms after the reset (interval " . self::INTERVAL_MS . ' ms)');

        // Events after the reset count everywhere. A bucket is the grain of a reset: the hosts
        // that did not make it take the whole second it fell in, so these come a second later.
        $resetSecond = \time();
        $this->waitUntil(fn () => \time() > $resetSecond + 1, 'the next second');
        foreach ($hosts as $host) {
            $host->record($service, 1, 1);
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertSame(['failures' => 1, 'successes' => 1, 'rejections' => 0], self::own($host, $service), $host->name);
            self::assertSame(['failures' => 3, 'successes' => 3, 'rejections' => 0], self::fleetCounts($host, $service), "{$host->name}: every host's events since the reset");
        }
    }

    /**
     * reset() on one host resets every service of its configuration on every host.
     */
    public function testResetOnOneHostReachesEveryHostWithinTwoIntervals(): void
    {
        $hosts = $this->startHosts();
        [$operator, $second] = $hosts;
        $services = [self::service('all'), self::service('all')];
        foreach ($services as $service) {
            $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);
        }

        $operator->ask(['op' => 'reset_all']);
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            foreach ($services as $service) {
                self::assertTrue($host->available($service), "{$host->name} admits {$service} two intervals after the reset");
                self::assertSame(0, self::fleetCounts($host, $service)['failures'], "{$host->name}, {$service}");
            }
        }
        self::assertStringContainsString('another host reset ', $second->sidecar->logText(), 'said once in the log');
    }

    /**
     * The events counted right after a reset, in the very bucket it fell in (buckets of 10 s
     * here), are counted on every host once every host has taken the reset: the host that made
     * it counts on at once, the others from the sync that took it.
     */
    public function testEventsCountedRightAfterAResetInItsBucketCountEverywhere(): void
    {
        $hosts = $this->startHosts(3, ['timeWindow' => 600, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => 600]);
        [$operator, $second, $third] = $hosts;
        $service = self::service('bucket');
        $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);

        $operator->ask(['op' => 'reset', 'service' => $service]);
        $operator->record($service, 1, 2);
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ([$second, $third] as $host) {
            self::assertTrue($host->available($service), "{$host->name} took the reset");
            $host->record($service, 0, 1);
        }
        // Once every host has published its counts of the reset's bucket lowered, and a sync more.
        $this->waitForSyncs($hosts, $this->nowMs(), 6);
        foreach ($hosts as $host) {
            self::assertSame(['failures' => 1, 'successes' => 4, 'rejections' => 0], self::fleetCounts($host, $service), "{$host->name}: every event since the reset");
        }
    }

    /**
     * A host whose sidecar is down when another host resets a service (killed, restarted after
     * the reset, with nothing of it in memory) takes the reset when it is back, and its
     * failures before it never reach another host's view meanwhile; then Redis loses
     * everything, and the reset, published again with the counts, still holds.
     */
    public function testAResetReachesAHostWhoseSidecarWasDownAndOutlivesRedisLosingEverything(): void
    {
        $hosts = $this->startHosts();
        [$operator, $second, $away] = $hosts;
        $service = self::service('away');
        $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);
        // The failures in buckets that ended before the reset, and the reset settled on the
        // others (every live host took it) before the host away is back.
        $failedBy = \time();
        $this->waitUntil(fn () => \time() > $failedBy, 'the next second');

        $away->sidecar->kill();
        $operator->ask(['op' => 'reset', 'service' => $service]);
        $this->waitForSyncs([$operator, $second], $this->nowMs(), 6);
        $away->sidecar->run();
        $back = $this->nowMs();
        $views = 0;
        $this->waitUntil(function () use ($hosts, $service, &$views): bool {
            foreach ([$hosts[0], $hosts[1]] as $host) {
                self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0, "{$host->name}: no failure of before the reset, ever");
                ++$views;
            }

            return ($hosts[2]->syncedAtMs() ?? 0) > 0 && (self::own($hosts[2], $service)['failures'] ?? 0) === 0;
        }, "{$away->name} takes the reset once its sidecar is back");
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        foreach ($hosts as $host) {
            self::assertTrue($host->available($service), "{$host->name}, its sidecar back");
            self::assertSame(0, self::fleetCounts($host, $service)['failures'], $host->name);
        }
        self::report("{$away->name}'s sidecar back after a reset: taken " . ($this->nowMs() - $back) . " ms after, {$views} views of the others with none of its failures");

        $this->redis->cli(['FLUSHALL']);
        $this->waitUntil(fn () => $this->redis->cli(['EXISTS', $this->shardKey($service)])['stdout'] === "1\n", 'the shard published again');
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        self::assertNotSame('', \trim($this->redis->cli(['HGET', $this->shardKey($service), 'z'])['stdout']), 'the reset published again with the counts');
        foreach ($hosts as $host) {
            self::assertTrue($host->available($service), "{$host->name}, after the FLUSHALL");
            self::assertSame(0, self::fleetCounts($host, $service)['failures'], "{$host->name}, after the FLUSHALL");
        }
    }

    /**
     * Five tripped hosts asking every 50 ms, the dependency still failing: one request of the
     * whole fleet goes through per intervalToHalfOpen (Ganesha's: more than that many whole
     * seconds after the last failure, a trial's failure included), not one per host. Once the
     * dependency heals, the trials succeed and the whole fleet closes.
     */
    public function testTheFleetSendsOneTrialPerIntervalAndClosesOnceHealed(): void
    {
        $interval = 2;
        $hosts = $this->startHosts(5, ['timeWindow' => 12, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => $interval]);
        $service = self::service('trial');
        $this->tripEveryHost($hosts, $service);

        $trials = $this->askForTrials($hosts, $service, \microtime(true) + 3 * ($interval + 1) + 1.5, false);
        $times = \array_column($trials, 1);
        self::assertGreaterThanOrEqual(3, \count($trials), 'a trial in each of 3 intervals: ' . \json_encode($trials));
        for ($i = 1; $i < \count($times); ++$i) {
            $gap = $times[$i] - $times[$i - 1];
            self::assertGreaterThan($interval - 0.1, $gap, "one trial per interval for the fleet, not one per host: " . \json_encode($trials));
            self::assertLessThan($interval + 2.5, $gap, 'no interval without a trial: ' . \json_encode($trials));
        }
        self::report(\sprintf('%d trials of 5 hosts asking every 50 ms over %.1f s (intervalToHalfOpen %d s), by %s', \count($trials), \end($times) - $times[0], $interval, \implode(', ', \array_column($trials, 0))));

        // Healed: the next trials succeed, and once the failures leave the window every host
        // closes.
        $this->waitUntil(function () use ($hosts, $service): bool {
            $this->askForTrials($hosts, $service, \microtime(true) + 0.2, true);
            foreach ($hosts as $host) {
                if (($host->snapshot()['snapshot'][$service]['state'] ?? 'closed') !== 'closed') {
                    return false;
                }
            }

            return true;
        }, 'every host closes once healed', 30.0);
        foreach ($hosts as $host) {
            self::assertTrue($host->available($service), $host->name);
        }
    }

    /**
     * The host that holds the fleet's next trial (the one host that asked) goes quiet: its
     * sidecar stopped, its PHP idle. Its lease ends half an interval after the trial is due, and
     * another host that asks takes the trial: within an interval of its due time, and one for
     * the fleet.
     */
    public function testAnotherHostTakesTheTrialOfAHolderThatWentQuiet(): void
    {
        $interval = 4;
        $hosts = $this->startHosts(5, ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => $interval]);
        $service = self::service('holder');
        $failedAt = $this->tripEveryHost($hosts, $service, false);
        [$holder] = $hosts;
        self::assertFalse($holder->available($service), 'tripped');
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $holder->sidecar->signal(\SIGSTOP);
        try {
            $others = \array_slice($hosts, 1);
            $trials = $this->askForTrials($others, $service, $failedAt + 2 * $interval + 1.5, false);
        } finally {
            $holder->sidecar->signal(\SIGCONT);
        }
        self::assertCount(1, $trials, 'one trial for the fleet: ' . \json_encode($trials));
        [[$taker, $at]] = $trials;
        self::assertGreaterThanOrEqual($failedAt + $interval, $at, 'not before it is due');
        self::assertLessThanOrEqual($failedAt + 2 * $interval + 1, $at, 'within an interval of its due time');
        self::report(\sprintf('the holder quiet: %s took the trial %.1f s after the last failure (intervalToHalfOpen %d s)', $taker, $at - $failedAt, $interval));
    }

    /**
     * Someone who can write Redis keeps writing the shard's trials with the service's failure an
     * hour ahead and the trial theirs, leased for a day: no host is kept from the fleet's trial,
     * and none sends more than one per interval.
     */
    public function testATrialSomeoneWroteInRedisKeepsNoHostFromIt(): void
    {
        $interval = 2;
        $hosts = $this->startHosts(3, ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => $interval]);
        $service = self::service('intruded');
        $failedAt = $this->tripEveryHost($hosts, $service);
        $written = 0;
        $intrude = function () use ($service, &$written): void {
            $this->evalLua(<<<'LUA'
                local now_ms = tonumber(redis.call('TIME')[1]) * 1000
                redis.call('HSET', KEYS[1], 't', cmsgpack.pack({ ARGV[1], now_ms + 3600000, 'intruder', now_ms + 86400000 }))
                return 1
                LUA, [$this->shardKey($service)], ['ganesha_' . $service]);
            ++$written;
        };
        $trials = $this->askForTrials($hosts, $service, $failedAt + 2 * ($interval + 1) + 1.5, false, $intrude);
        self::assertNotEmpty($trials, "the fleet's trial, whatever Redis says");
        self::assertLessThanOrEqual($failedAt + $interval + 3, $trials[0][1], 'on time: ' . \json_encode($trials));
        // A field rewritten under the hosts loses who held the trial, as an eviction does: two
        // hosts may then hold it at once, but never a host more than one per interval, as alone.
        $last = [];
        foreach ($trials as [$name, $at]) {
            self::assertGreaterThan($interval - 0.1, $at - ($last[$name] ?? 0.0), "{$name}: one trial per interval: " . \json_encode($trials));
            $last[$name] = $at;
        }
        self::report(\sprintf('the trials written over %d times by an intruder: %d trials, the first %.1f s after the last failure', $written, \count($trials), $trials[0][1] - $failedAt));
    }

    /**
     * 2 failures on each host, which trip every host through the fleet's counts; the second of
     * the last failure. With $asking, each host asks (isAvailable()) and is rejected; without,
     * no host asks: the snapshot tells.
     *
     * @param list<\Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost> $hosts
     */
    private function tripEveryHost(array $hosts, string $service, bool $asking = true): int
    {
        foreach ($hosts as $host) {
            $host->record($service, 2);
        }
        $failedAt = \time();
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            $tripped = $asking ? !$host->available($service) : $host->snapshot()['snapshot'][$service]['state'] === 'open';
            self::assertTrue($tripped, "{$host->name} trips on the fleet's failures");
        }

        return $failedAt;
    }

    /**
     * Every host asks for $service every 50 ms until $until (unix time), reporting a success or
     * a failure ($ok) when admitted, and $between() runs after each round; the requests
     * admitted: the host and when.
     *
     * @param list<\Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost> $hosts
     * @return list<array{0: string, 1: float}>
     */
    private function askForTrials(array $hosts, string $service, float $until, bool $ok, ?callable $between = null): array
    {
        $trials = [];
        while (($started = \microtime(true)) < $until) {
            if ($between !== null) {
                $between();
            }
            foreach ($hosts as $host) {
                if ($host->ask(['op' => 'trial', 'service' => $service, 'ok' => $ok])['admitted']) {
                    $trials[] = [$host->name, \microtime(true)];
                }
            }
            \usleep(\max(0, (int) (($started + 0.05 - \microtime(true)) * 1e6)));
        }

        return $trials;
    }
}
