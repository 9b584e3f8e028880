<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetSidecar;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;

/**
 * What the hosts themselves do to a fleet over time: names that churn for days, services that go
 * idle, PHP restarted with a new segment file. The sidecar's memory stays bounded, and its log
 * says what happened, never a fault that did not.
 */
final class FleetHostFaultsTest extends FleetTestCase
{
    /**
     * Four phases of 15,000 new service names each (a 10 s window): after each, once its names
     * have left every window, the resident memory of the sidecar of the host that counted them,
     * and of one that saw them only through the fleet, is within 1 MB of what it was after the
     * first. A sidecar once kept a mark of every name it ever wrote a ring of, for good.
     */
    public function testTheSidecarsMemoryStaysFlatWhenNamesChurn(): void
    {
        $ganesha = ['timeWindow' => 10, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        // Room for two phases' names at once: a phase's slots outlive its window a little.
        $ini = ['ganesha_shm.max_services' => 32768, 'ganesha_shm.max_buckets' => 10];
        $counter = $this->startHost('h1', $ganesha, ini: $ini);
        $observer = $this->startHost('h2', $ganesha, ini: ['ganesha_shm.max_buckets' => 10]);
        $this->waitForSyncs([$counter, $observer], $this->nowMs(), 1);
        $rss = ['h1' => [], 'h2' => []];
        for ($phase = 0; $phase < 4; ++$phase) {
            $started = \microtime(true);
            $prefix = self::service("churn{$phase}") . '.';
            $taken = $counter->ask(['op' => 'spray', 'prefix' => $prefix, 'count' => 15_000])['taken'];
            self::assertSame(15_000, $taken, "phase {$phase}: every name counted");
            $this->waitForSyncs([$counter, $observer], $this->nowMs(), 2);
            $seen = \array_filter(\array_keys($observer->snapshot()['snapshot']), fn ($service) => \str_starts_with((string) $service, $prefix));
            self::assertNotSame([], $seen, "phase {$phase}: h2 sees the names through the fleet");
            // Once the names have left every window and what the sidecars read (10 s, a bucket,
            // how far a stamp may be off, two intervals): what is left, they keep for good.
            \usleep((int) \max(0, ($started + 17.0 - \microtime(true)) * 1e6));
            $this->waitForSyncs([$counter, $observer], $this->nowMs(), 1);
            foreach ([$counter, $observer] as $host) {
                $rss[$host->name][] = ProcFs::statusKb($host->sidecar->pid(), 'RssAnon');
            }
        }
        self::report('sidecars\' RssAnon after 4 phases of 15,000 new names each: h1 ' . \implode(', ', $rss['h1']) . ' kB; h2 ' . \implode(', ', $rss['h2']) . ' kB');
        foreach ($rss as $name => $figures) {
            self::assertLessThan(1024, \max($figures) - $figures[0], "{$name}'s sidecar's RssAnon after each phase, kB: " . \implode(', ', $figures));
        }
    }

    /**
     * A shard whose services all went idle expires in Redis by design, once its newest bucket is
     * past every window. A new service of the same shard later makes it anew: no sidecar says
     * that Redis lost anything.
     */
    public function testAShardThatExpiredWhenItsServicesWentIdleIsNotSaidLost(): void
    {
        $ganesha = ['timeWindow' => 4, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        $hosts = $this->startHosts(2, $ganesha);
        $idle = self::service('idle');
        foreach ($hosts as $host) {
            $host->record($idle, 1, 1);
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        self::assertSame(2, self::fleetCounts($hosts[0], $idle)['failures'] ?? null);
        $shard = $this->shardKey($idle);
        $gone = $this->waitForNoKeys(fn () => $this->keys($shard), 'the idle shard expires', 30.0);

        // Another service of the same shard.
        do {
            $next = self::service('next');
        } while (self::shardOf($next) !== self::shardOf($idle));
        $hosts[0]->record($next, 1);
        $this->waitUntil(fn () => $this->keys($shard) !== [], 'the shard made anew');
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        self::assertSame(1, self::fleetCounts($hosts[1], $next)['failures'] ?? null, "h2 reads the shard made anew:\n" . $this->logs());
        foreach ($hosts as $host) {
            self::assertSame(0, $host->sidecar->logLines('Redis lost'), "{$host->name} says nothing of a loss:\n" . $host->sidecar->logText());
        }
        self::report("an idle shard expired {$gone} ms after it was seen; made anew by another service: no line of a loss");
    }

    /**
     * PHP restarted with a new segment file (the old one removed) is a new host to the fleet; its
     * sidecar attaches to the new file, and finds its earlier file's id under its name: that is
     * no other host, and it says none runs under its name.
     */
    public function testAHostsOwnEarlierFileIsNoNamesake(): void
    {
        [$host, $other] = $this->startHosts(2);
        $service = self::service('renewed');
        $host->record($service, 2);
        $this->waitForSyncs([$host, $other], $this->nowMs());

        $sidecar = $host->sidecar;
        $host->stopPhp();
        \unlink($host->segment);
        $renewed = new FleetHost($host->name, $host->segment, self::GANESHA, "{$this->dir}/{$host->name}.renewed.php.log");
        $renewed->sidecar = $sidecar;
        $this->hosts[$host->name] = $renewed;
        $renewed->snapshot();
        $this->waitUntil(fn () => $sidecar->logLines('attaching again') >= 1 && $sidecar->logLines('attached to') >= 2, 'the sidecar attaches to the new file');
        $renewed->record($service, 1);
        $this->waitForSyncs([$renewed, $other], $this->nowMs(), 4);
        self::assertSame(3, self::fleetCounts($other, $service)['failures'] ?? null, "h2 counts the old file's 2 failures and the new one's 1:\n" . $this->logs());
        self::assertSame(0, $sidecar->logLines('another host runs under the name'), "no namesake:\n" . $sidecar->logText());
    }
    /**
     * resetService() and reset() on a host that sees the service only through the fleet (it never
     * counted it): every host admits within two intervals, the fleet's counts of before the reset
     * gone. Such a host once had nothing of the service to reset, and nothing reached the fleet.
     */
    public function testAResetOnAHostThatSeesTheServiceOnlyThroughTheFleetReachesEveryHost(): void
    {
        foreach (['reset', 'reset_all'] as $op) {
            $service = self::service($op);
            $this->startHost("h1.{$op}")->record($service, 4);
            $this->startHost("h2.{$op}")->record($service, 4);
            $observer = $this->startHost("h3.{$op}");
            $hosts = \array_values($this->hosts);
            $this->waitForSyncs($hosts, $this->nowMs());
            self::assertSame([8, true], [self::fleetCounts($observer, $service)['failures'] ?? null, $observer->snapshot()['snapshot'][$service]['fleet']['only'] ?? null], "{$op}: h3 sees the service only through the fleet");

            $observer->ask(['op' => $op, 'service' => $service]);
            $reset = $this->nowMs();
            $this->waitForSyncs($hosts, $reset, 2);
            foreach ($hosts as $host) {
                self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0, "{$op} on h3: {$host->name}'s view two intervals after\n" . $this->logs());
                self::assertTrue($host->available($service), "{$op} on h3: {$host->name} admits two intervals after");
            }
            foreach ($this->hosts as $host) {
                $host->close();
            }
            $this->hosts = [];
        }
    }

    /**
     * resetService() on a host whose sidecar is down (stopped by SIGTERM, or killed), then the
     * sidecar started again: every host admits within two intervals of it running, the failures
     * of before the reset gone. The sidecar once inferred a reset from counters it saw change
     * between two of its syncs, so it never shared one made while it was down.
     */
    public function testAResetMadeWhileTheSidecarIsDownReachesEveryHostOnceItRuns(): void
    {
        foreach (['SIGTERM' => false, 'SIGKILL' => true] as $how => $killed) {
            $this->startHost("h1.{$how}");
            $this->startHost("h2.{$how}");
            $this->startHost("h3.{$how}");
            $hosts = \array_values($this->hosts);
            [$operator] = $hosts;
            $this->waitForSyncs($hosts, $this->nowMs(), 1);
            $service = self::service('down');
            $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);

            $killed ? $operator->sidecar->kill() : $operator->sidecar->stop();
            $operator->ask(['op' => 'reset', 'service' => $service]);
            $this->waitForSyncs(\array_slice($hosts, 1), $this->nowMs(), 2);
            foreach (\array_slice($hosts, 1) as $host) {
                self::assertFalse($host->available($service), "{$how}: {$host->name} still rejects: the reset has not reached it");
            }
            $operator->sidecar->run();
            $running = $this->nowMs();
            $this->waitForSyncs($hosts, $running, 2);
            foreach ($hosts as $host) {
                self::assertSame(0, self::fleetCounts($host, $service)['failures'] ?? 0, "{$how}: {$host->name}'s view two intervals after the sidecar runs again\n" . $this->logs());
                self::assertTrue($host->available($service), "{$how}: {$host->name} admits two intervals after the sidecar runs again");
            }
            foreach ($this->hosts as $host) {
                $host->close();
            }
            $this->hosts = [];
        }
    }
    /**
     * h1's segment file copied to a new host (an image with /run on disk): the copy's PHP, the
     * first to map it, finds it in another file than it records, takes it as another host before
     * it counts, and says so in one line; then every host's view is exact: what h1 counted before
     * the copy once, and what each of the two counted since.
     */
    public function testASegmentFileCopiedToAnotherHostBecomesAHostOfItsOwn(): void
    {
        [$original, $observer] = $this->startHosts(2);
        $service = self::service('copied');
        $original->record($service, 3);
        $observer->record($service, 0, 1);
        $this->waitForSyncs([$original, $observer], $this->nowMs());
        \copy($original->segment, "{$this->dir}/copy.segment");
        \chmod("{$this->dir}/copy.segment", 0600);
        $this->waitForSyncs([$original, $observer], $this->nowMs(), 1);

        $copy = $this->startHost('copy');
        $hosts = [$original, $observer, $copy];
        $this->waitForSyncs($hosts, $this->nowMs(), 1);
        $original->record($service, 5);
        $copy->record($service, 7);
        $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertSame([15, 1], [self::fleetCounts($host, $service)['failures'] ?? null, self::fleetCounts($host, $service)['successes'] ?? null], "{$host->name}'s view: 3 before the copy, 5 and 7 since\n" . $this->logs());
        }
        $taken = \substr_count((string) \file_get_contents("{$this->dir}/copy.php.log"), 'is a copy of another segment file');
        self::assertSame(1, $taken, "one line, in the copy's PHP log:\n" . $this->logs());
        $found = 'another segment runs under this host\'s id';
        self::assertSame(0, $copy->sidecar->logLines($found) + $original->sidecar->logLines($found), "taken before either published under the other's id:\n" . $this->logs());
    }

    /**
     * h1's segment restored from an older copy of itself (a virtual machine rolled back): h1 had
     * counted 4 failures when the copy was taken, and 1 more after. Once restored, every host's
     * view, h1's own included, holds the 5 (the fleet has the 5th under h1's id), and what h1
     * counts since counts too. The restored host once took its own 5th failure off as its own.
     */
    public function testASegmentRestoredFromAnOlderCopyOfItselfSeesItsFleetExactly(): void
    {
        [$host, $other] = $this->startHosts(2, self::COUNTING);
        $service = self::service('restored');
        $host->record($service, 4);
        $other->record($service, 0, 2);
        $this->waitForSyncs([$host, $other], $this->nowMs());
        \copy($host->segment, "{$this->dir}/older.segment");
        $host->record($service, 1);
        $this->waitForSyncs([$host, $other], $this->nowMs());
        self::assertSame(5, self::fleetCounts($other, $service)['failures'] ?? null);

        $host->close();
        \copy("{$this->dir}/older.segment", $host->segment);
        $restored = $this->startHost($host->name, self::COUNTING);
        $this->waitForSyncs([$restored, $other], $this->nowMs(), 3);
        foreach ([$restored, $other] as $each) {
            self::assertSame([5, 2], [self::fleetCounts($each, $service)['failures'] ?? null, self::fleetCounts($each, $service)['successes'] ?? null], "{$each->name}'s view after the restore\n" . $this->logs());
        }
        $restored->record($service, 2);
        $this->waitForSyncs([$restored, $other], $this->nowMs());
        foreach ([$restored, $other] as $each) {
            self::assertSame(7, self::fleetCounts($each, $service)['failures'] ?? null, "{$each->name}'s view, 2 more since the restore\n" . $this->logs());
        }
        self::assertSame(0, $restored->sidecar->logLines('another host runs under the name'), "no namesake:\n" . $restored->sidecar->logText());
    }
    /**
     * A second sidecar started on a segment that one syncs already (a unit started twice) waits,
     * and says why: two on one segment would each take the other's calls for a copy's.
     */
    public function testASecondSidecarOnOneSegmentWaitsAndSaysWhy(): void
    {
        [$host, $other] = $this->startHosts(2);
        $second = FleetSidecar::start($this->sidecarArgs($host, $this->redis->url(), 'twice'), "{$this->dir}/twice.fleet.log");
        try {
            $this->waitUntil(fn () => $second->logLines('one sidecar a segment') === 1, 'the second sidecar says why it waits');
            $service = self::service('twice');
            $host->record($service, 3);
            $this->waitForSyncs([$host, $other], $this->nowMs(), 4);
            self::assertSame(3, self::fleetCounts($other, $service)['failures'] ?? null, "h2 counts h1's 3 failures once:\n" . $this->logs());
            self::assertSame(0, $host->sidecar->logLines('another segment runs under this host\'s id'), "h1 keeps its id:\n" . $host->sidecar->logText());
            self::assertTrue($second->running(), 'the second sidecar waits, it does not exit');
            self::assertSame(1, $second->logLines('one sidecar a segment'), "once:\n" . $second->logText());
        } finally {
            $second->stop();
        }
    }
}
