<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\SkewedClock;

/**
 * Fleet mode on three hosts and one redis-server: what the fleet shares, that a host's own
 * evidence is never hidden, exact counts, and that no failure of Redis or of a sidecar makes
 * a request wait or decides on stale counts.
 */
final class FleetTest extends FleetTestCase
{
    public function testFailuresSpreadOverTheFleetOpenEveryHostWithinTwoIntervals(): void
    {
        $hosts = $this->startHosts();
        $service = self::service('spread');
        foreach ($hosts as $host) {
            $host->record($service, 2);
            self::assertSame(2, self::own($host, $service)['failures'], 'alone, 2 failures are below minimumRequests (6)');
        }
        $after = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), "host {$host->name} trips on the fleet's 6 failures");
            $fleet = $host->snapshot()['snapshot'][$service]['fleet'];
            self::assertSame([6, true], [$fleet['failures'], $fleet['decides']], $host->name);
        }
        self::report("every host open {$after} ms after the last failure (interval " . self::INTERVAL_MS . ' ms)');
    }

    public function testOneHostWhoseCallsFailTripsAloneWhileTheFleetIsHealthy(): void
    {
        [$broken, $second, $third] = $this->startHosts();
        $service = self::service('route');
        $broken->record($service, 6);
        $second->record($service, 0, 100);
        $third->record($service, 0, 100);
        $this->waitForSyncs([$broken, $second, $third], $this->nowMs());

        self::assertFalse($broken->available($service), 'its own 6 failures trip it, though the fleet is at 6 in 206');
        $row = $broken->snapshot()['snapshot'][$service];
        self::assertSame([6, 200, false], [$row['fleet']['failures'], $row['fleet']['successes'], $row['fleet']['decides']]);
        self::assertTrue($second->available($service));
        self::assertTrue($third->available($service));
    }

    public function testEachHostSendsItsOwnTrialAndClosesOnceTheFailuresAreGone(): void
    {
        $hosts = $this->startHosts(3, ['timeWindow' => 6, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => 1]);
        $service = self::service('recover');
        foreach ($hosts as $host) {
            $host->record($service, 2);
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), $host->name);
        }
        // After intervalToHalfOpen, each host admits one trial of its own; it succeeds.
        \sleep(2);
        foreach ($hosts as $host) {
            self::assertTrue($host->ask(['op' => 'trial', 'service' => $service, 'ok' => true])['admitted'], "{$host->name}'s trial");
            self::assertFalse($host->available($service), "{$host->name}: one trial, the next request is rejected");
        }
        // Once the failures have left the 6 s window, on every host and in the fleet's counts.
        // (Read-only: an isAvailable() would be admitted as the next trial, closed or not.)
        foreach ($hosts as $host) {
            $closed = fn () => ($host->snapshot()['snapshot'][$service]['state'] ?? 'closed') === 'closed';
            $this->waitUntil($closed, "{$host->name} closes again", 15.0);
            self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0);
        }
    }

    public function testFleetCountsAreExactAndEveryHostKeepsItsOwn(): void
    {
        $hosts = $this->startHosts(3, ['timeWindow' => 600, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600]);
        $this->assertExactCounts($hosts, false);
    }

    /**
     * As above, with h3's clock 8 s ahead (an LD_PRELOAD shim on its PHP and its sidecar): its
     * events land in buckets 8 s later than the others', which count them once their own clocks
     * reach those buckets, and every count still adds up. (2 s buckets: h3 is always 4 or 5
     * buckets ahead; a 120 s window holds them all.)
     */
    public function testFleetCountsAreExactWithOneHostsClockAhead(): void
    {
        $missing = SkewedClock::unavailable();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $ganesha = ['timeWindow' => 120, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        $hosts = $this->startHosts(3, $ganesha, null, [], [], ['h3' => SkewedClock::env($this->dir, 8)]);
        $this->assertExactCounts($hosts, true);
    }

    public function testRedisStoppedForTenSecondsMakesNoRequestWaitAndHostsDecideAloneUntilItIsBack(): void
    {
        $hosts = $this->startHosts();
        $service = self::service('hung');
        foreach ($hosts as $host) {
            $host->record($service, 2);
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        self::assertFalse($hosts[0]->available($service), 'open on the fleet\'s counts');

        $this->redis->signal(\SIGSTOP);
        $stopped = $this->nowMs();
        $slowest = $this->trafficFor(10.0, $hosts, $service);
        foreach ($hosts as $host) {
            $info = $host->snapshot()['info'];
            self::assertSame(0, $info['fleet_attached'], "{$host->name} no longer uses the fleet's counts");
            self::assertGreaterThan(0, $info['fleet_sync_errors'], $host->name);
            self::assertTrue($host->available($service), "{$host->name} decides on its own 2 failures: closed");
        }
        $this->redis->signal(\SIGCONT);
        $back = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), "{$host->name} open again on the fleet's counts");
        }
        self::assertStringContainsString('resumed after', $hosts[0]->sidecar->logText());
        self::report(\sprintf('Redis stopped 10 s: slowest report %.2f ms; the fleet view back %d ms after SIGCONT', $slowest, $back));
        self::assertLessThan(10_000 + 20_000, $this->nowMs() - $stopped);
    }

    public function testRedisKilledAndRestartedEmptyIsRebuiltFromTheHosts(): void
    {
        $hosts = $this->startHosts();
        $service = self::service('flushed');
        foreach ($hosts as $host) {
            $host->record($service, 2);
        }
        $this->waitForSyncs($hosts, $this->nowMs());

        $this->redis->kill();
        $slowest = $this->trafficFor(2.0, $hosts, $service);
        foreach ($hosts as $host) {
            self::assertNull(self::fleetCounts($host, $service), "{$host->name}: no fleet view while Redis is down");
        }
        $killed = $this->redis->port;
        $this->redis->run();
        self::assertSame($killed, $this->redis->port, 'restarted empty, on the same port');
        $back = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertSame(6, self::fleetCounts($host, $service)['failures'] ?? null, "{$host->name}: rebuilt from what the hosts publish again");
        }
        self::report(\sprintf('Redis killed: slowest report %.2f ms; rebuilt %d ms after the restart', $slowest, $back));
    }

    /**
     * Redis flushed under live connections (FLUSHALL, or a failover to an empty replica that
     * keeps the connections): no sidecar reconnects, and a host whose counts did not change
     * would send nothing; each finds the shards' versions behind its own, and publishes again.
     */
    public function testRedisFlushedUnderLiveConnectionsIsRebuiltFromTheHosts(): void
    {
        $hosts = $this->startHosts();
        $service = self::service('flushall');
        foreach ($hosts as $host) {
            $host->record($service, 2);
        }
        $this->waitForSyncs($hosts, $this->nowMs());

        self::assertSame("OK\n", $this->redis->cli(['FLUSHALL'])['stdout']);
        $flushed = $this->nowMs();
        $this->waitForSyncs($hosts, $flushed, 3);
        foreach ($hosts as $host) {
            self::assertSame(6, self::fleetCounts($host, $service)['failures'] ?? null, "{$host->name}: rebuilt from what the hosts publish again:\n" . $this->logs());
            self::assertStringContainsString('publishing it again', $host->sidecar->logText());
        }
        self::assertNotSame([], $this->keys('*' . $service . '*'), 'the sums are back in Redis');
    }

    public function testASidecarKilledAndRestartedLeavesItsHostAloneMeanwhile(): void
    {
        [$first, $second, $third] = $this->startHosts();
        $service = self::service('sidecar');
        $first->record($service, 2);
        $second->record($service, 2);
        $third->record($service, 2);
        $this->waitForSyncs([$first, $second, $third], $this->nowMs());

        $first->sidecar->kill();
        $slowest = $this->trafficFor(1.0, [$first], $service);
        self::assertSame(0, $first->snapshot()['info']['fleet_attached'], 'two intervals after its sidecar died');
        self::assertTrue($first->available($service), 'alone again: 2 failures');
        self::assertFalse($second->available($service), 'the others still count the first host\'s published failures');

        $first->sidecar->run();
        $this->waitForSyncs([$first], $this->nowMs());
        self::assertFalse($first->available($service));
        self::assertSame(6, self::fleetCounts($first, $service)['failures']);
        self::report(\sprintf('sidecar killed: slowest report %.2f ms', $slowest));
    }

    public function testASidecarStoppedWithSigtermClearsTheFleetViewAtOnce(): void
    {
        [$first, $second] = $this->startHosts(2);
        $service = self::service('term');
        $first->record($service, 3);
        $second->record($service, 3);
        $this->waitForSyncs([$first, $second], $this->nowMs());
        self::assertFalse($first->available($service));

        self::assertSame(0, $first->sidecar->stop(), 'a clean exit');
        self::assertSame(0, $first->snapshot()['info']['fleet_attached'], 'at once, not two intervals later');
        self::assertTrue($first->available($service));
        self::assertStringContainsString('stopping', $first->sidecar->logText());
    }

    public function testEveryKeyTheFleetWroteHasALifetimeAndExpiresOnceTrafficStops(): void
    {
        $hosts = $this->startHosts(3, ['timeWindow' => 2, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => 600]);
        foreach ([self::service('ttl'), self::service('ttl')] as $service) {
            foreach ($hosts as $host) {
                $host->record($service, 1, 1);
            }
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        $keys = $this->keys();
        self::assertNotSame([], $keys, 'the fleet wrote its counts');
        foreach ($keys as $key) {
            $ttl = (int) $this->redis->cli(['TTL', $key])['stdout'];
            self::assertGreaterThan(0, $ttl, "{$key} has a lifetime");
            self::assertStringStartsWith('ganesha-shm:2:', $key);
        }
        $idle = $this->waitForNoKeys(fn () => $this->serviceKeys(), "the services' keys, while the sidecars run", 30.0);
        foreach ($hosts as $host) {
            self::assertSame(0, $host->sidecar->stop());
        }
        $gone = $this->waitForNoKeys(fn () => $this->keys(), 'every key, once the sidecars stopped', 15.0);
        self::report(\count($keys) . " keys: the services' gone {$idle} ms after the last traffic's sync (window 2 s), the rest {$gone} ms after the sidecars stopped");
    }

    /**
     * Random events of three services on three hosts; then every host's own counts are its own
     * events, and its fleet view is the sum of every host's. With $skewed, the views are awaited
     * (one host's clock is ahead: the others count its events once their clocks reach them).
     *
     * @param list<FleetHost> $hosts
     */
    private function assertExactCounts(array $hosts, bool $skewed): void
    {
        $services = [self::service('mix'), self::service('mix'), self::service('mix')];
        $seen = [];
        // A success of every service on every host first: a host keeps the fleet's counts of the
        // services it counts itself.
        foreach ($hosts as $host) {
            foreach ($services as $service) {
                $host->record($service, 0, 1);
                $seen[$host->name][$service] = ['failures' => 0, 'successes' => 1];
            }
        }
        \mt_srand(22);
        for ($round = 0; $round < 12; ++$round) {
            $host = $hosts[\mt_rand(0, 2)];
            $service = $services[\mt_rand(0, 2)];
            [$failures, $successes] = [\mt_rand(0, 5), \mt_rand(0, 9)];
            $host->record($service, $failures, $successes);
            $seen[$host->name][$service]['failures'] = ($seen[$host->name][$service]['failures'] ?? 0) + $failures;
            $seen[$host->name][$service]['successes'] = ($seen[$host->name][$service]['successes'] ?? 0) + $successes;
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        $totals = [];
        foreach ($services as $service) {
            $total = ['failures' => 0, 'successes' => 0];
            foreach ($hosts as $host) {
                $total['failures'] += $seen[$host->name][$service]['failures'] ?? 0;
                $total['successes'] += $seen[$host->name][$service]['successes'] ?? 0;
            }
            $totals[$service] = [$total['failures'], $total['successes'], 0];
        }
        if ($skewed) {
            $exact = function () use ($hosts, $totals): bool {
                foreach ($hosts as $host) {
                    foreach ($totals as $service => $total) {
                        if (\array_values(self::fleetCounts($host, $service) ?? []) !== $total) {
                            return false;
                        }
                    }
                }

                return true;
            };
            $settled = $this->waitUntil($exact, 'every fleet view adds up', 30.0);
            self::report("one host 8 s ahead: every fleet view exact {$settled} ms after the last events' sync");
        }
        foreach ($services as $service) {
            foreach ($hosts as $host) {
                $own = self::own($host, $service) ?? ['failures' => 0, 'successes' => 0, 'rejections' => 0];
                $mine = $seen[$host->name][$service] ?? ['failures' => 0, 'successes' => 0];
                self::assertSame([$mine['failures'], $mine['successes'], 0], [$own['failures'], $own['successes'], $own['rejections']], "{$host->name}'s own counts of {$service}");
                self::assertSame($totals[$service], \array_values(self::fleetCounts($host, $service) ?? []), "{$host->name}'s fleet view of {$service}");
            }
        }
    }

    /**
     * Reports a success and a failure on each host, round after round, for $seconds: the
     * slowest report in ms. Fails if a report is slow enough to have waited on Redis, or if a
     * host's PHP process holds a socket (requests never touch the network).
     *
     * @param list<\Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost> $hosts
     */
    private function trafficFor(float $seconds, array $hosts, string $service): float
    {
        $slowest = 0.0;
        $deadline = \microtime(true) + $seconds;
        $other = $service . '.other';
        while (\microtime(true) < $deadline) {
            foreach ($hosts as $host) {
                $slowest = \max($slowest, $host->record($other, 1, 1));
            }
            \usleep(50_000);
        }
        foreach ($hosts as $host) {
            self::assertSame(0, $host->ask(['op' => 'sockets'])['sockets'], "{$host->name}'s PHP holds no socket");
        }
        // A command timeout of the sidecars is 300 ms: a report that waited on Redis would take it.
        self::assertLessThan(250.0, $slowest, 'no report waits on Redis');

        return $slowest;
    }
}
