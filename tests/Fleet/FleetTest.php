<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

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
        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($this->startHosts(), self::service('spread'));
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

    /**
     * With the fleet's view stale (every sidecar stopped), each host decides alone, trials
     * included: each sends its own trial, as a host without fleet mode does (with the view
     * fresh, the fleet sends one: FleetCircuitTest).
     */
    public function testEachHostSendsItsOwnTrialWhileTheFleetViewIsStaleAndClosesOnceTheFailuresAreGone(): void
    {
        $hosts = $this->startHosts(3, ['timeWindow' => 6, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => 1]);
        $service = self::service('recover');
        foreach ($hosts as $host) {
            $host->record($service, 6);
        }
        $failedAt = \time();
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), $host->name);
            $host->sidecar->signal(\SIGSTOP);
        }
        try {
            foreach ($hosts as $host) {
                $this->waitUntil(fn () => $host->syncedAtMs() === null, "{$host->name}'s fleet view stale");
            }
            $this->waitUntil(fn () => \time() > $failedAt + 2, 'intervalToHalfOpen after the last failure');
            foreach ($hosts as $host) {
                self::assertTrue($host->ask(['op' => 'trial', 'service' => $service, 'ok' => true])['admitted'], "{$host->name}'s trial");
                self::assertFalse($host->available($service), "{$host->name}: one trial, the next request is rejected");
            }
        } finally {
            foreach ($hosts as $host) {
                $host->sidecar->signal(\SIGCONT);
            }
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
        $this->assertExactCounts($this->startHosts(3, self::COUNTING), false);
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
        foreach ($hosts as $host) {
            // A timeout said as one, not as the socket's EAGAIN ("Resource temporarily unavailable").
            self::assertSame(1, $host->sidecar->logLines('no reply within the command timeout (--command-timeout-ms)'), "{$host->name}:\n" . $host->sidecar->logText());
        }
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
            self::assertStringContainsString('published again', $host->sidecar->logText());
        }
        self::assertSame("1\n", $this->redis->cli(['EXISTS', $this->shardKey($service)])['stdout'], 'the sums are back in Redis');
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
            self::assertStringStartsWith('ganesha-shm:4:', $key);
        }
        $idle = $this->waitForNoKeys(fn () => $this->serviceKeys(), "the services' keys, while the sidecars run", 30.0);
        foreach ($hosts as $host) {
            self::assertSame(0, $host->sidecar->stop());
        }
        $gone = $this->waitForNoKeys(fn () => $this->keys(), 'every key, once the sidecars stopped', 15.0);
        self::report(\count($keys) . " keys: the services' gone {$idle} ms after the last traffic's sync (window 2 s), the rest {$gone} ms after the sidecars stopped");
    }
}
