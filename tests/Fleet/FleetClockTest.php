<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\SkewedClock;

/**
 * Hosts whose clocks are behind or ahead of Redis's, within the bound (60 s): each stamps its
 * buckets on Redis's clock by how far its own is off, so that a reset cuts every host's counts at
 * the same moment, and a host behind or ahead reads the fleet's counts of its own window.
 * (The clocks are an LD_PRELOAD shim on a host's PHP and its sidecar; Redis's is the machine's.)
 */
final class FleetClockTest extends FleetTestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        $missing = SkewedClock::unavailable();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    /**
     * An operator resets a service on h1; then h3, whose clock is 20 s (and, on h4, 5 s) behind,
     * sees 8 failures of it. Every host, a host that sees the service only through the fleet
     * (h2) included, counts those 8 and rejects: what a host counts after a reset is never taken
     * for what came before it because its clock is behind.
     */
    public function testFailuresAfterAResetOnAHostWhoseClockIsBehindCountOnEveryHost(): void
    {
        foreach ([-20, -5] as $round => $behind) {
            // Hosts of their own each round: a host is its segment file.
            $this->startHost("h1.{$round}");
            $this->startHost("h2.{$round}");
            $late = $this->startHost("h3.{$round}", env: SkewedClock::env($this->dir, $behind));
            $hosts = \array_values($this->hosts);
            $this->waitForSyncs($hosts, $this->nowMs(), 1);
            $service = self::service('behind');
            $hosts[0]->record($service, 0, 1);
            $this->waitForSyncs($hosts, $this->nowMs());

            $hosts[0]->ask(['op' => 'reset', 'service' => $service]);
            $this->waitForSyncs($hosts, $this->nowMs());
            $late->record($service, 8);
            $took = $this->waitUntil(function () use ($hosts, $service): bool {
                foreach ($hosts as $host) {
                    if ((self::fleetCounts($host, $service)['failures'] ?? null) !== 8 || $host->available($service)) {
                        return false;
                    }
                }

                return true;
            }, "every host counts the 8 failures of the host {$behind} s behind after the reset, and rejects", 15.0);
            foreach ($hosts as $host) {
                self::assertSame(8, self::fleetCounts($host, $service)['failures'] ?? null, "{$host->name}'s view, {$behind} s behind");
            }
            self::report("a host {$behind} s behind: its 8 failures after a reset counted by every host {$took} ms after they came");
            foreach ($this->hosts as $host) {
                $host->close();
            }
            $this->hosts = [];
        }
    }

    /**
     * h3, whose clock is 20 s ahead, sees 8 failures of a service; its sidecar is stopped; an
     * operator resets the service on h1. h1, and h2, which sees the service only through the
     * fleet, hold none of those failures and admit, while h3's sidecar is down and once it is
     * back: the failures came before the reset, whatever h3's clock says.
     */
    public function testFailuresBeforeAResetOnAHostWhoseClockIsAheadAndWhoseSidecarWasDownNeverCountAgain(): void
    {
        $this->startHost('h1');
        $this->startHost('h2');
        $early = $this->startHost('h3', env: SkewedClock::env($this->dir, 20));
        [$operator, $observer] = $hosts = \array_values($this->hosts);
        $this->waitForSyncs($hosts, $this->nowMs(), 1);
        $service = self::service('ahead');
        $operator->record($service, 0, 1);
        $early->record($service, 8);
        $this->waitForSyncs($hosts, $this->nowMs());
        // h2 asks nothing before the reset: a rejection would make the service its own.
        self::assertSame([8, true], [self::fleetCounts($observer, $service)['failures'] ?? null, $observer->snapshot()['snapshot'][$service]['fleet']['only'] ?? null], 'h2 sees the failures only through the fleet');
        foreach ([$operator, $early] as $host) {
            self::assertFalse($host->available($service), "{$host->name} rejects on h3's 8 failures before the reset");
        }

        $early->sidecar->stop();
        $operator->ask(['op' => 'reset', 'service' => $service]);
        $watch = function () use ($operator, $observer, $service): void {
            foreach ([$operator, $observer] as $host) {
                self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0, "{$host->name}: none of h3's failures of before the reset\n" . $this->logs());
            }
        };
        // Long enough for any settling of the reset's buckets to end (four intervals).
        $this->waitForSyncs([$operator, $observer], $this->nowMs(), 8);
        $watch();
        self::assertTrue($observer->snapshot()['snapshot'][$service]['fleet']['only'] ?? true, 'h2 still sees the service only through the fleet');
        foreach ([$operator, $observer] as $host) {
            self::assertTrue($host->available($service), "{$host->name} admits, h3's sidecar down");
        }

        $early->sidecar->run();
        $this->waitUntil(fn () => ($early->syncedAtMs() ?? 0) > 0 && (self::own($early, $service)['failures'] ?? 0) === 0, 'h3 takes the reset once its sidecar is back');
        $this->waitForSyncs($hosts, $this->nowMs(), 6);
        $watch();
        foreach ($hosts as $host) {
            self::assertTrue($host->available($service), "{$host->name} admits, h3's sidecar back");
        }
    }

    /**
     * h2 sees 8 failures of a service. h1's sidecar is stopped, h1's clock steps back 30 s, and an
     * operator resets the service on h1 before its sidecar runs again (which is when it could
     * measure the step). The reset is dated by h1's monotonic clock, which the step did not move:
     * every host takes h2's 8 failures, counted before it, and admits. (Dated by h1's clock less
     * the figure measured before the step, it came 30 s early and took none of them.)
     */
    public function testAResetMadeAfterTheClockSteppedBackTakesTheFailuresCountedBeforeIt(): void
    {
        $clock = "{$this->dir}/h1.clock";
        $operator = $this->startHost('h1', env: SkewedClock::steppable($this->dir, $clock));
        $counter = $this->startHost('h2');
        $hosts = [$operator, $counter];
        $this->waitForSyncs($hosts, $this->nowMs(), 1);
        $service = self::service('stepped');
        $operator->record($service, 0, 1);
        $counter->record($service, 8);
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), "{$host->name} rejects on h2's 8 failures before the reset");
        }

        $operator->sidecar->stop();
        SkewedClock::step($clock, -30);
        $operator->ask(['op' => 'reset', 'service' => $service]);
        $operator->sidecar->run();
        $this->waitUntil(fn () => ($operator->syncedAtMs() ?? 0) > 0, 'h1 syncs again once its sidecar is back');
        $this->waitForSyncs($hosts, $this->nowMs(), 4);
        foreach ($hosts as $host) {
            self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0, "{$host->name}: none of h2's failures of before the reset\n" . $this->logs());
            self::assertTrue($host->available($service), "{$host->name} admits after the reset");
        }
    }

    /**
     * Four hosts on time see 4 failures each of a service: the fleet's 16 trip it. A host whose
     * clock is 30 s behind, and one 59 s behind, that never called the service reject it from
     * their first request, and send it none of 20: the fleet's buckets are in their window
     * whatever their clocks say.
     */
    public function testAHostWhoseClockIsBehindRejectsAServiceTheFleetTrippedFromItsFirstRequest(): void
    {
        $service = self::service('tripped');
        for ($i = 1; $i <= 4; ++$i) {
            $this->startHost("h{$i}")->record($service, 4);
        }
        $behind = ['h5' => -30, 'h6' => -59];
        foreach ($behind as $name => $seconds) {
            $this->startHost($name, env: SkewedClock::env($this->dir, $seconds));
        }
        $this->waitForSyncs(\array_values($this->hosts), $this->nowMs());
        foreach ($behind as $name => $seconds) {
            $host = $this->hosts[$name];
            $admitted = 0;
            for ($request = 0; $request < 20; ++$request) {
                $admitted += (int) $host->available($service);
            }
            self::assertSame(0, $admitted, "{$name}, {$seconds} s behind, sends nothing to the service the fleet tripped\n" . $this->logs());
            self::assertSame(16, self::fleetCounts($host, $service)['failures'] ?? null, "{$name} sees the fleet's 16 failures");
        }
    }
}
