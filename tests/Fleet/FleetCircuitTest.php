<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

/**
 * The fleet as one circuit: what one host does to a service reaches every host.
 */
final class FleetCircuitTest extends FleetTestCase
{
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
}
