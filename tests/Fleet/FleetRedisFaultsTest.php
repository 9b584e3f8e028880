<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\HoldingProxy;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\SkewedClock;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Fleet mode under the faults every Redis in production has (issue 38), on real hosts, sidecars
 * and redis-server, with traffic: a script that fails half way, keys evicted or deleted, a
 * sync delivered late, a clock that steps, names that churn. Each test counts every event it
 * makes, and checks that no host's view of the fleet is ever above what the hosts counted
 * (nothing counted twice), and that every view is exact again two intervals after the fault.
 *
 * Faults are written into Redis whatever the format of the fleet's keys (the shard hashes of
 * format 3, `ganesha-shm:4:{<fleet>:<shard>}`; the keys of each shard of format 2), so that each
 * test also shows the fault on a build of format 2.
 */
final class FleetRedisFaultsTest extends FleetTestCase
{
    /** @var array<string, array{0: int, 1: int}> every event the test counted, by service: failures, successes */
    private array $counted = [];

    /** @var int views sampled, and found at most what the hosts counted */
    private int $samples = 0;

    /**
     * Defect 1 (a script failing half way double counted) and defect 2 (lost sums corrupted the
     * fleet for a window): the sums deleted, each shard deleted, FLUSHALL, and Redis back to an
     * older copy of the shards (as after a failover to a replica that missed the last writes, or a
     * restart from an older save), each in the middle of random events on three hosts. No view is
     * ever above what the hosts counted, and two intervals after each fault every view is exact.
     */
    public function testSumsLostUnderTrafficAreExactAgainTwoIntervalsLater(): void
    {
        $hosts = $this->startHosts(3, self::COUNTING);
        $services = $this->servicesCountedEverywhere($hosts, 'lost', 3);
        \mt_srand(38);
        $faults = [
            'the sums deleted' => fn () => self::assertGreaterThan(0, (int) $this->evalLua(self::DELETE_SUMS, [], ["*{{$this->fleet}:*"]), 'sums to delete'),
            'the shards deleted' => fn () => $this->redis->cli(['DEL', ...$this->serviceKeys()]),
            'FLUSHALL' => fn () => self::assertSame("OK\n", $this->redis->cli(['FLUSHALL'])['stdout']),
            'an older copy of the shards' => fn () => self::assertGreaterThan(0, (int) $this->evalLua(self::OLDER_COPY, [], ["*{{$this->fleet}:*", 'restore'])),
        ];
        foreach ($faults as $what => $fault) {
            // The copy Redis goes back to, for the last fault: the shards as they are now.
            $this->evalLua(self::OLDER_COPY, [], ["*{{$this->fleet}:*", 'save']);
            $this->trafficAround($hosts, $services, 2.0, $fault);
            $healed = $this->waitForSyncs($hosts, $this->nowMs(), 2);
            $this->assertExact($hosts, $services, "two intervals after {$what} under traffic");
            self::report("{$what} under traffic: every view exact two intervals ({$healed} ms) after the last events");
        }
        self::report("{$this->samples} views sampled under the faults, none above what the hosts counted");
    }

    /**
     * The sums lost while a host had not read a bucket's last write: h2 publishes 5 successes in
     * a bucket no one writes again while h1's sidecar is held; the sums go; h1, let go, reads a
     * bucket that changed and finds no sums in it. Redis recounts them from every writer's counts
     * in that call (a host keeps what it last read of a bucket: h2's 5 successes would be lost to
     * h1 for the whole window).
     */
    public function testSumsLostBeforeAHostReadThemAreRecountedForIt(): void
    {
        $ganesha = ['timeWindow' => 60, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        [$h1, $h2] = $hosts = $this->startHosts(2, $ganesha);
        $service = $this->servicesCountedEverywhere($hosts, 'unread', 1)[0];
        $this->waitForSyncs($hosts, $this->nowMs());
        $h1->sidecar->signal(\SIGSTOP);
        try {
            $this->countEvents($h2, $service, 0, 5);
            $this->waitForSyncs([$h2], $this->nowMs());
            // The next events go to another bucket (of 1 s): h2's 5 successes are in one no one writes again.
            \usleep((int) ((\floor(\microtime(true)) + 1.05 - \microtime(true)) * 1e6));
            self::assertGreaterThan(0, (int) $this->evalLua(self::DELETE_SUMS, [], ["*{{$this->fleet}:*"]), 'sums to delete');
        } finally {
            $h1->sidecar->signal(\SIGCONT);
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'after h1 read a bucket whose sums were lost');
        self::report("sums lost before a host read them: recounted for it in the call that found them lost");
    }

    /**
     * A reset where the sums were lost: h3 counts 4 failures and its sidecar stops; the sums go;
     * h2 resets the service. The reset takes every host's counts out of the buckets before it by
     * their writers' counts, not by the sums (which no longer say who counted what): when h1
     * writes the bucket again and the sums are counted anew, h3's 4 failures are not in them.
     */
    public function testAResetWhereTheSumsWereLostTakesEveryHostsCounts(): void
    {
        // Buckets of 10 s: everything below falls in one.
        $ganesha = ['timeWindow' => 600, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        [$h1, $h2, $h3] = $hosts = $this->startHosts(3, $ganesha);
        $service = $this->servicesCountedEverywhere($hosts, 'unreset', 1)[0];
        $this->awaitBucketAfterReset(10);
        $this->countEvents($h3, $service, 4, 0);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'before the reset');
        $h3->sidecar->signal(\SIGSTOP);
        try {
            self::assertGreaterThan(0, (int) $this->evalLua(self::DELETE_SUMS, [], ["*{{$this->fleet}:*"]), 'sums to delete');
            $h2->ask(['op' => 'reset', 'service' => $service]);
            $this->counted[$service] = [0, 0];
            $this->waitForSyncs([$h1, $h2], $this->nowMs());
            $this->countEvents($h1, $service, 1, 0);
            $this->waitForSyncs([$h1, $h2], $this->nowMs(), 3);
            $this->assertNeverAbove([$h1, $h2], [$service]);
        } finally {
            $h3->sidecar->signal(\SIGCONT);
        }
        $this->waitForSyncs($hosts, $this->nowMs(), 2);
        $this->assertNeverAbove($hosts, [$service]);
        self::report("a reset where the sums were lost: no view has the counts of before it back");
    }

    /**
     * Redis back to an older copy of itself (a failover to a replica that missed the last writes,
     * a restart from an older save): h1's 5 failures were published after the copy was made, in a
     * bucket no one writes again. While h1's and h2's sidecars are held, a new host, h3, syncs
     * first: publishing everything, it moves the shard's version on from the copy's, up to the one
     * h1 and h2 read, so that the version alone tells them nothing. h1 finds Redis without its
     * last write, publishes all it holds and gives the shard a new birth; every view, h3's too
     * (it reads only what Redis holds), has h1's 5 failures within two intervals.
     */
    public function testRedisBackToAnOlderCopyOfItselfLosesNoCount(): void
    {
        $ganesha = ['timeWindow' => 60, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        [$h1, $h2] = $hosts = $this->startHosts(2, $ganesha);
        $service = $this->servicesCountedEverywhere($hosts, 'older', 1)[0];
        $this->waitForSyncs($hosts, $this->nowMs());
        self::assertGreaterThan(0, (int) $this->evalLua(self::OLDER_COPY, [], ["*{{$this->fleet}:*", 'save']));
        $this->countEvents($h1, $service, 5, 0);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'before Redis goes back');
        // The next events go to another bucket (of 1 s): h1's 5 failures are in one no one writes again.
        \usleep((int) ((\floor(\microtime(true)) + 1.05 - \microtime(true)) * 1e6));
        foreach ([$h1, $h2] as $host) {
            $host->sidecar->signal(\SIGSTOP);
        }
        try {
            self::assertGreaterThan(0, (int) $this->evalLua(self::OLDER_COPY, [], ["*{{$this->fleet}:*", 'restore']));
            $hosts[] = $h3 = $this->startHost('h3', $ganesha);
            $this->countEvents($h3, $service, 0, 1);
            $this->waitForSyncs([$h3], $this->nowMs(), 1);
        } finally {
            foreach ([$h1, $h2] as $host) {
                $host->sidecar->signal(\SIGCONT);
            }
        }
        $this->countEvents($h2, $service, 1, 0);
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertNeverAbove($hosts, [$service]);
        $this->assertExact($hosts, [$service], 'two intervals after Redis went back to an older copy of the shard');
        self::assertGreaterThanOrEqual(1, $h1->sidecar->logLines('Redis lost what this host published'), "h1 found out:\n" . $this->logs());
        self::report("Redis back to a copy older than h1's last sync, a new host syncing first: every view exact again, h1's published failures included");
    }

    /**
     * Defect 2: eviction. Redis with maxmemory and allkeys-lru (sampling one key, so that the
     * fleet's keys go as often as any), filled by another application's keys until it evicted
     * shards of the fleet, under traffic on three hosts counting 300 services. No view is ever
     * above what the hosts counted; once the other application's keys are gone (the loss ends),
     * every view is exact within two intervals, and no host publishes again after that.
     */
    public function testEvictionUnderAllkeysLruHealsAndNoHostRepublishesForEver(): void
    {
        $this->redis = RedisServer::start($this->dir, args: ['--maxmemory', '12mb', '--maxmemory-policy', 'allkeys-lru', '--maxmemory-samples', '1']);
        $hosts = $this->startHosts(3, self::COUNTING);
        $services = $this->servicesCountedEverywhere($hosts, 'evicted', 300);
        $lost = fn () => \array_sum(\array_map(fn (FleetHost $host) => $host->sidecar->logLines('Redis lost what this host published'), $hosts));
        $deadline = \microtime(true) + 60.0;
        $batches = 0;
        while ($lost() < 2) {
            self::assertLessThan($deadline, \microtime(true), "the other application's keys evicted no shard of the fleet:\n" . $this->redis->cli(['INFO', 'stats'])['stdout']);
            // 2 MB of another application's keys, then traffic.
            $this->evalLua(self::FILL, [], ['other:' . $batches++ . ':', '2000', '1000']);
            $this->trafficAround($hosts, $services, 0.3, null);
        }
        $evicted = (int) \preg_replace('/.*evicted_keys:(\d+).*/s', '$1', $this->redis->cli(['INFO', 'stats'])['stdout']);
        // The other application goes: its keys deleted, the loss ends.
        $this->evalLua("for _, key in ipairs(redis.call('KEYS', 'other:*')) do redis.call('DEL', key) end return 1");
        $this->trafficAround($hosts, $services, 0.3, null);
        $ended = $this->nowMs();
        $healed = $this->waitForSyncs($hosts, $ended, 2);
        $this->assertExact($hosts, $services, 'two intervals after the evictions ended');
        $lines = $lost();
        $this->waitForSyncs($hosts, $this->nowMs(), 10);
        self::assertSame($lines, $lost(), "no host publishes again once nothing is evicted:\n" . $this->logs());
        $this->assertExact($hosts, $services, 'ten intervals later');
        foreach ($hosts as $host) {
            self::assertSame(1, $host->sidecar->logLines('Redis evicts keys when it reaches maxmemory', 'allkeys-lru'), "the policy is said once at connection:\n" . $host->sidecar->logText());
        }
        self::report("allkeys-lru: {$evicted} keys evicted, {$lines} shards of the fleet lost and published again; every view exact {$healed} ms after the evictions ended; {$this->samples} views sampled, none above the hosts' counts");
    }

    /**
     * Defect 3: a sync delivered late rolled a host back. h1 reaches Redis through a proxy that
     * holds a sync of h1 (with 4 failures more), until the sidecar timed out, reconnected, and
     * published since (those and 3 more); then the proxy delivers the held sync. It changes
     * nothing: every view keeps h1's 7 failures more.
     */
    public function testASyncDeliveredLateRollsNoHostBack(): void
    {
        $this->redis = RedisServer::start($this->dir);
        $proxy = HoldingProxy::start($this->dir, $this->redis->port);
        try {
            $h1 = $this->startHost('h1', self::COUNTING, $proxy->url());
            $h2 = $this->startHost('h2', self::COUNTING);
            $hosts = [$h1, $h2];
            $this->waitForSyncs($hosts, $this->nowMs(), 1);
            $service = self::service('late');
            $this->countEvents($h1, $service, 5, 1);
            $this->countEvents($h2, $service, 1, 1);
            $this->waitForSyncs($hosts, $this->nowMs());
            $this->assertExact($hosts, [$service], 'before the partition');

            // The next sync of h1 is held: the 4 failures it carries reach no one.
            $proxy->hold();
            $this->countEvents($h1, $service, 4, 0);
            $this->waitUntil(fn () => $proxy->heldBytes() > 0, 'a sync of h1 is held');
            $held = $proxy->heldBytes();
            // The partition: h1's connection is cut; its sidecar reconnects through the proxy and
            // publishes again, with 3 failures more.
            $proxy->cut();
            $this->countEvents($h1, $service, 3, 0);
            $this->waitUntil(fn () => $h1->sidecar->logLines('resumed after') >= 1, "h1's sidecar syncs again after the partition");
            $this->waitForSyncs($hosts, $this->nowMs());
            $this->assertExact($hosts, [$service], 'after the partition healed');

            // The held sync is delivered now, late.
            $proxy->release();
            $this->waitForSyncs($hosts, $this->nowMs(), 3);
            $this->assertExact($hosts, [$service], "after h1's sync of before the partition was delivered late");
            self::report("a sync of {$held} bytes held through a partition, delivered after the reconnection: no view moved back");
        } finally {
            $proxy->stop();
        }
    }

    /**
     * A call that arrives twice (a retransmission, a proxy that retries): h1's sync that says it
     * reset its counts (5 failures withdrawn) and carries 2 failures counted since is held, then
     * delivered; h1 counts 3 more and syncs; then the held call is delivered again, on another
     * connection. The copy changes nothing: every view keeps h1's 5 failures since the reset,
     * and none from before it, h2's included (a reset reaches the fleet).
     */
    public function testACallDeliveredTwiceChangesNothingTheSecondTime(): void
    {
        $this->redis = RedisServer::start($this->dir);
        $proxy = HoldingProxy::start($this->dir, $this->redis->port);
        // Buckets of 10 s: the 3 failures after the reset fall in the bucket the held call set.
        $ganesha = ['timeWindow' => 600, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        try {
            $h1 = $this->startHost('h1', $ganesha, $proxy->url());
            $h2 = $this->startHost('h2', $ganesha);
            $hosts = [$h1, $h2];
            $this->waitForSyncs($hosts, $this->nowMs(), 1);
            $service = $this->servicesCountedEverywhere($hosts, 'twice', 1)[0];
            $this->countEvents($h1, $service, 5, 0);
            $this->countEvents($h2, $service, 1, 0);
            $this->waitForSyncs($hosts, $this->nowMs());
            $this->assertExact($hosts, [$service], 'before the reset');

            // The reset and the 2 failures go in h1's next sync, which the proxy holds.
            $h1->sidecar->signal(\SIGSTOP);
            try {
                $h1->ask(['op' => 'reset', 'service' => $service]);
                // What every host counted before the reset is gone.
                $this->counted[$service] = [0, 0];
                $this->awaitBucketAfterReset(10);
                $this->countEvents($h1, $service, 2, 0);
                $proxy->hold();
            } finally {
                $h1->sidecar->signal(\SIGCONT);
            }
            $held = $proxy->awaitHeld();
            $proxy->release();
            $this->countEvents($h1, $service, 3, 0);
            $this->waitForSyncs($hosts, $this->nowMs(), 2);
            $this->assertExact($hosts, [$service], "after h1's reset");

            $replayed = $proxy->replay();
            self::assertGreaterThanOrEqual($held, $replayed);
            $this->waitForSyncs($hosts, $this->nowMs(), 3);
            $this->assertNeverAbove($hosts, [$service]);
            $this->assertExact($hosts, [$service], "after h1's call with the reset arrived again");
            self::report("a call of {$held} bytes with a reset delivered again after a newer one: no view moved");
        } finally {
            $proxy->stop();
        }
    }

    /**
     * Defect 4: a clock that steps retracted counts. h3's clock steps back 30 s while it counts
     * (the buckets it published are in its future now), then forward 60 s (30 s ahead: the
     * buckets it published first leave its 60 s window), then back to time. The other hosts'
     * views keep every event h3 published: what a host published is never taken back because
     * its clock moved. (h3's own view, of what its clock has reached, is never above either.)
     */
    public function testAClockSteppedBackAndForwardRetractsNothing(): void
    {
        [$hosts, $clock] = $this->startHostsWithASteppableH3();
        [$h1, $h2, $h3] = $hosts;
        $service = $this->servicesCountedEverywhere($hosts, 'step', 1)[0];
        $this->countEvents($h3, $service, 5, 2);
        $this->countEvents($h1, $service, 1, 0);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'before the steps');
        // Back 30 s: h3 counts on, in buckets the others have passed already.
        SkewedClock::step($clock, -30);
        $this->countEvents($h3, $service, 2, 1);
        $this->countEvents($h1, $service, 1, 0);
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertNeverAbove($hosts, [$service]);
        $this->assertExact([$h1, $h2], [$service], "with h3's clock 30 s behind");
        // Forward 60 s: what h3 counted before the steps has left its window, not the others'.
        SkewedClock::step($clock, 30);
        $this->countEvents($h1, $service, 1, 0);
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertNeverAbove($hosts, [$service]);
        $this->assertExact([$h1, $h2], [$service], "with h3's clock 30 s ahead");
        // Back on time, all see all.
        SkewedClock::step($clock, 0);
        $this->countEvents($h3, $service, 1, 1);
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertExact($hosts, [$service], "with h3's clock on time again");
        self::report("h3's clock stepped back 30 s, forward 60 s, back 30 s while counting: the others' views kept every event it published");
    }

    /**
     * A clock stepped back before the sidecar published what was counted: h3 counts while its
     * sidecar is held, its clock steps back 30 s, it counts again, and its sidecar goes on. The
     * buckets counted before the step are in h3's future now: the sidecar still publishes them,
     * stamped by the figure they were counted under (not 30 s in Redis's future, where no window
     * reads them yet), and once more when a bucket counted after the step shares its stamp. The
     * other hosts' views have every event h3 counted, at once.
     */
    public function testWhatWasCountedBeforeAStepBackIsPublishedUnderItsOwnTime(): void
    {
        [$hosts, $clock] = $this->startHostsWithASteppableH3();
        [$h1, $h2, $h3] = $hosts;
        $service = $this->servicesCountedEverywhere($hosts, 'unpublished', 1)[0];
        // Early in a second: the events after the step fall in the same second of Redis's clock.
        \usleep((int) ((\floor(\microtime(true)) + 1.05 - \microtime(true)) * 1e6));
        $h3->sidecar->signal(\SIGSTOP);
        try {
            $this->countEvents($h3, $service, 5, 2);
            SkewedClock::step($clock, -30);
            $this->countEvents($h3, $service, 2, 1);
        } finally {
            $h3->sidecar->signal(\SIGCONT);
        }
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertNeverAbove($hosts, [$service]);
        $this->assertExact([$h1, $h2], [$service], "after h3's clock stepped back 30 s before its sidecar published");
        self::report("h3 counted, its clock stepped back 30 s, it counted again, then its sidecar synced: the others' views have every event");
    }

    /**
     * A sidecar restarted after a step of its clock: h3 counts, its clock steps back 30 s, its
     * sidecar syncs (and takes a new figure for what its clock reaches from then on), then
     * restarts with nothing in memory. It stamps the buckets its segment holds by the figures the
     * segment keeps, each as it was first shared: the other hosts' views have each of h3's events
     * once. (Stamped anew by the figure after the step, the buckets of before it were shared a
     * second time, 30 s later on Redis's clock.)
     */
    public function testASidecarRestartedAfterAStepSharesWhatWasCountedBeforeItOnce(): void
    {
        [$hosts, $clock] = $this->startHostsWithASteppableH3();
        [$h1, $h2, $h3] = $hosts;
        $service = $this->servicesCountedEverywhere($hosts, 'restarted', 1)[0];
        $this->countEvents($h3, $service, 5, 2);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'before the step');
        SkewedClock::step($clock, -30);
        $this->countEvents($h3, $service, 2, 1);
        $this->waitForSyncs($hosts, $this->nowMs(), 2);
        $h3->sidecar->stop();
        $h3->sidecar->run();
        $this->waitUntil(fn () => ($h3->syncedAtMs() ?? 0) > 0, "h3's sidecar syncs again");
        $this->waitForSyncs($hosts, $this->nowMs(), 3);
        $this->assertNeverAbove($hosts, [$service]);
        $this->assertExact([$h1, $h2], [$service], "after h3's sidecar restarted, its clock 30 s behind");
        self::report("h3 counted, its clock stepped back 30 s, its sidecar restarted: the others' views have each event once");
    }

    /**
     * What a host published goes down for one reason, said as such: a reset. h1 resets a service
     * (resetService()): within two intervals every view has nothing left of h1's counts before
     * the reset, and h1's counts after it join as before.
     */
    public function testAResetIsTheOneThingThatTakesAHostsCountsBack(): void
    {
        [$h1, $h2] = $hosts = $this->startHosts(2, self::COUNTING);
        $service = $this->servicesCountedEverywhere($hosts, 'reset', 1)[0];
        $this->countEvents($h1, $service, 5, 3);
        $this->countEvents($h2, $service, 2, 0);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], 'before the reset');

        $h1->ask(['op' => 'reset', 'service' => $service]);
        // What every host counted before the reset is gone: h1's 5 failures and 4 successes, h2's 2 failures.
        $this->counted[$service] = [0, 0];
        self::assertSame([0, 0], [self::own($h1, $service)['failures'] ?? 0, self::own($h1, $service)['successes'] ?? 0]);
        $reset = $this->nowMs();
        $this->waitForSyncs($hosts, $reset, 2);
        $this->assertExact($hosts, [$service], "two intervals after h1's reset");
        self::assertSame(0, self::own($h2, $service)['failures'] ?? 0, "h2's own failures before the reset");

        $this->awaitBucketAfterReset(10);
        $this->countEvents($h1, $service, 1, 1);
        $this->waitForSyncs($hosts, $this->nowMs());
        $this->assertExact($hosts, [$service], "after h1 counted again");
        self::report("a reset on h1: every view without any host's counts of before it two intervals after it");
    }

    /**
     * Defect 5: names that churn (a service per tenant or URL) grew Redis's memory without bound:
     * the shards' change sets kept every name. Three hosts count a stable service and, for 8 s,
     * 5 new names a round each: every key of the fleet has a lifetime all along, and once the
     * names stop coming, none of them is left in Redis within the window (4 s) and a few
     * intervals, and the fleet's memory in Redis is back to what the stable service alone takes.
     */
    public function testChurningServiceNamesLeaveNothingInRedis(): void
    {
        $ganesha = ['timeWindow' => 4, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];
        $hosts = $this->startHosts(3, $ganesha);
        $stable = self::service('stable');
        $stableTraffic = function (float $seconds) use ($hosts, $stable): void {
            $until = \microtime(true) + $seconds;
            while (\microtime(true) < $until) {
                foreach ($hosts as $host) {
                    $host->record($stable, 1, 1);
                }
                \usleep(100_000);
            }
        };
        $stableTraffic(6.0);
        $baseline = $this->fleetMemory();
        $churn = Unique::name('churn');
        $until = \microtime(true) + 8.0;
        $names = 0;
        $checked = 0;
        while (\microtime(true) < $until) {
            foreach ($hosts as $host) {
                for ($i = 0; $i < 5; ++$i) {
                    $host->record("{$churn}.{$names}", 1, 0);
                    ++$names;
                }
                $host->record($stable, 1, 1);
            }
            if ($names % 150 === 0) {
                foreach ($this->fleetKeys() as $key) {
                    self::assertGreaterThan(0, (int) $this->redis->cli(['TTL', $key])['stdout'], "{$key} has a lifetime");
                    ++$checked;
                }
            }
            \usleep(100_000);
        }
        $peak = $this->fleetMemory();
        self::assertGreaterThan(0, $this->namesInRedis($churn), 'the churned names were shared');
        $stopped = $this->nowMs();
        $deadline = \microtime(true) + 25.0;
        while (($left = $this->namesInRedis($churn)) > 0) {
            self::assertLessThan($deadline, \microtime(true), "{$left} churned names still in Redis 25 s after they stopped:\n" . $this->logs());
            $stableTraffic(0.5);
        }
        $gone = $this->nowMs() - $stopped;
        $stableTraffic(2.0);
        $after = $this->fleetMemory();
        // Within 4 kB: the stable service's shard, grown past the compact encoding of a small hash
        // during the churn, keeps the larger one (Redis never converts a hash back).
        self::assertLessThanOrEqual($baseline + 4096, $after, "the fleet's memory in Redis back to the stable service's ({$baseline} B before the churn, {$peak} B at its end)");
        foreach ($this->fleetKeys() as $key) {
            self::assertGreaterThan(0, (int) $this->redis->cli(['TTL', $key])['stdout'], "{$key} has a lifetime");
        }
        self::report("{$names} names churned over 8 s: none left in Redis {$gone} ms after they stopped (window 4 s); the fleet's keys took {$baseline} B before, {$peak} B at the end of the churn, {$after} B after (MEMORY USAGE); {$checked} lifetimes checked");
    }

    /**
     * A call that fails half way counts nothing twice: Redis out of memory (noeviction) for a
     * while, then each key of the fleet's services made a key of another type for a while and
     * given back as it was, all under traffic on three hosts. No view is ever above what the
     * hosts counted, and two intervals after the last fault every view is exact.
     */
    public function testAFailedCallOrAKeyOfAnotherTypeCountsNothingTwice(): void
    {
        $hosts = $this->startHosts(3, self::COUNTING);
        $services = $this->servicesCountedEverywhere($hosts, 'error', 3);
        \mt_srand(39);
        $this->trafficAround($hosts, $services, 1.0, null);

        // Out of memory, evicting nothing: every write refused, as a script's first one is.
        $used = $this->usedMemory();
        $this->redis->cli(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']);
        $this->trafficAround($hosts, $services, 2.0, fn () => $this->redis->cli(['CONFIG', 'SET', 'maxmemory', (string) \intdiv($used, 2)]));
        $this->redis->cli(['CONFIG', 'SET', 'maxmemory', '0']);
        $this->trafficAround($hosts, $services, 1.0, null);

        // Each key of the fleet's services, in turn, of another type, then given back.
        $keys = $this->serviceKeys();
        self::assertNotSame([], $keys);
        foreach ($keys as $key) {
            $this->redis->cli(['RENAME', $key, "{$key}.aside"]);
            $this->redis->cli(['SET', $key, 'not a hash']);
            $this->trafficAround($hosts, $services, 3 * self::INTERVAL_MS / 1000, null);
            $this->redis->cli(['DEL', $key]);
            $this->redis->cli(['RENAME', "{$key}.aside", $key]);
            $this->trafficAround($hosts, $services, 3 * self::INTERVAL_MS / 1000, null);
        }
        $healed = $this->waitForSyncs($hosts, $this->nowMs(), 2);
        $this->assertExact($hosts, $services, 'two intervals after the faults');
        self::report('out of memory, then ' . \count($keys) . " keys of another type in turn, under traffic: every view exact {$healed} ms after; {$this->samples} views sampled, none above the hosts' counts");
    }

    /**
     * Deletes the fleet's sums, of either format (ARGV[1]: the pattern of the fleet's service
     * keys): format 2's sums hashes (`…:s:<service>`), format 3's `s:` fields. How many.
     */
    private const DELETE_SUMS = <<<'LUA'
        local deleted = 0
        for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
          if redis.call('TYPE', key).ok == 'hash' then
            if string.find(key, ':s:', 1, true) then
              deleted = deleted + redis.call('DEL', key)
            else
              for _, field in ipairs(redis.call('HKEYS', key)) do
                if string.sub(field, 1, 2) == 's:' then
                  deleted = deleted + redis.call('HDEL', key, field)
                end
              end
            end
          end
        end
        return deleted
        LUA;

    /**
     * The fleet's service keys (ARGV[1], a pattern) copied aside (ARGV[2] "save"), or put back as
     * they were copied, the copies gone (ARGV[2] "restore"), each with a lifetime. How many keys.
     */
    private const OLDER_COPY = <<<'LUA'
        local done = 0
        for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
          local older = string.sub(key, -6) == '.older'
          if ARGV[2] == 'save' and not older then
            redis.call('COPY', key, key .. '.older', 'REPLACE')
            redis.call('PEXPIRE', key .. '.older', 600000)
            done = done + 1
          elseif ARGV[2] == 'restore' and older then
            local original = string.sub(key, 1, -7)
            redis.call('COPY', key, original, 'REPLACE')
            redis.call('PEXPIRE', original, 600000)
            redis.call('DEL', key)
            done = done + 1
          end
        end
        return done
        LUA;

    /** Another application's keys: ARGV[2] of ARGV[3] bytes each, named from ARGV[1]. */
    private const FILL = <<<'LUA'
        local value = string.rep('x', tonumber(ARGV[3]))
        for i = 1, tonumber(ARGV[2]) do
          redis.call('SET', ARGV[1] .. i, value)
        end
        return 1
        LUA;

    /**
     * How many times names starting with ARGV[1] appear in the fleet's keys (ARGV[2], a pattern),
     * whatever their type: in hash fields and values (packed or not), set and sorted set members,
     * strings.
     */
    private const NAMES = <<<'LUA'
        local found = 0
        local function count(text)
          local from = 1
          while true do
            local at = string.find(text, ARGV[1], from, true)
            if not at then
              return
            end
            found, from = found + 1, at + 1
          end
        end
        for _, key in ipairs(redis.call('KEYS', ARGV[2])) do
          local kind = redis.call('TYPE', key).ok
          local items = {}
          if kind == 'hash' then
            items = redis.call('HGETALL', key)
          elseif kind == 'zset' then
            items = redis.call('ZRANGE', key, 0, -1)
          elseif kind == 'set' then
            items = redis.call('SMEMBERS', key)
          elseif kind == 'string' then
            items = { redis.call('GET', key) }
          end
          for _, item in ipairs(items) do
            count(item)
          end
        end
        return found
        LUA;

    /** How many times names starting with $prefix appear in the fleet's keys. */
    private function namesInRedis(string $prefix): int
    {
        return (int) $this->evalLua(self::NAMES, [], [$prefix, "*{$this->fleet}*"]);
    }

    /** What the fleet's keys take in Redis: the sum of their MEMORY USAGE. */
    private function fleetMemory(): int
    {
        return (int) $this->evalLua(
            "local bytes = 0 for _, key in ipairs(redis.call('KEYS', ARGV[1])) do bytes = bytes + (redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0') or 0) end return bytes",
            [],
            ["*{$this->fleet}*"],
        );
    }

    /** Redis's used_memory (INFO memory). */
    private function usedMemory(): int
    {
        \preg_match('/^used_memory:(\d+)/m', $this->redis->cli(['INFO', 'memory'])['stdout'], $match);

        return (int) $match[1];
    }

    /**
     * $count new services, each counted once (a success) on every host: a host keeps the fleet's
     * counts of the services it counts itself.
     *
     * @param list<FleetHost> $hosts
     * @return list<string>
     */
    private function servicesCountedEverywhere(array $hosts, string $stem, int $count): array
    {
        $services = [];
        for ($i = 0; $i < $count; ++$i) {
            $services[] = $service = self::service($stem);
            foreach ($hosts as $host) {
                $this->countEvents($host, $service, 0, 1);
            }
        }
        $this->waitForSyncs($hosts, $this->nowMs());

        return $services;
    }

    /** $failures and $successes of $service on $host, counted by the test too. */
    private function countEvents(FleetHost $host, string $service, int $failures, int $successes): void
    {
        $host->record($service, $failures, $successes);
        $this->counted[$service][0] = ($this->counted[$service][0] ?? 0) + $failures;
        $this->counted[$service][1] = ($this->counted[$service][1] ?? 0) + $successes;
    }

    /**
     * Random events of $services on $hosts for $seconds, with $fault() once half-way; after each
     * round, every host's view of the fleet is checked to be at most what the hosts counted.
     *
     * @param list<FleetHost> $hosts
     * @param list<string> $services
     */
    private function trafficAround(array $hosts, array $services, float $seconds, ?callable $fault): void
    {
        $started = \microtime(true);
        while (($elapsed = \microtime(true) - $started) < $seconds) {
            $this->countEvents($hosts[\mt_rand(0, \count($hosts) - 1)], $services[\mt_rand(0, \count($services) - 1)], \mt_rand(0, 3), \mt_rand(0, 5));
            if ($fault !== null && $elapsed >= $seconds / 2) {
                $fault();
                $fault = null;
            }
            $this->assertNeverAbove($hosts, $services);
            \usleep(40_000);
        }
    }

    /**
     * Every host's view of the fleet (when it has one: a host whose view is stale decides alone)
     * is at most what the hosts counted: nothing is counted twice.
     *
     * @param list<FleetHost> $hosts
     * @param list<string> $services
     */
    private function assertNeverAbove(array $hosts, array $services): void
    {
        foreach ($hosts as $host) {
            $snapshot = $host->snapshot()['snapshot'];
            foreach ($services as $service) {
                $fleet = $snapshot[$service]['fleet'] ?? null;
                if ($fleet === null) {
                    continue;
                }
                [$failures, $successes] = $this->counted[$service] ?? [0, 0];
                $what = "{$host->name}'s view of {$service}: {$fleet['failures']} failures and {$fleet['successes']} successes, the hosts counted {$failures} and {$successes}";
                self::assertLessThanOrEqual($failures, $fleet['failures'], "{$what}:\n" . $this->logs());
                self::assertLessThanOrEqual($successes, $fleet['successes'], "{$what}:\n" . $this->logs());
                ++$this->samples;
            }
        }
    }

    /**
     * Waits for the first bucket of $seconds after the one a reset just made fell in: the bucket
     * a reset fell in is left out of every view until every host has taken the reset
     * (docs/fleet.md, "A reset reaches the fleet"), so that events counted to be seen everywhere
     * two intervals later come after it.
     */
    private function awaitBucketAfterReset(int $seconds): void
    {
        $reset = \time() + 1;
        $this->waitUntil(fn () => \intdiv(\time(), $seconds) > \intdiv($reset, $seconds), 'the next bucket', $seconds + 5.0);
    }

    /**
     * Every host's view of the fleet is what the hosts counted.
     *
     * @param list<FleetHost> $hosts
     * @param list<string> $services
     */
    private function assertExact(array $hosts, array $services, string $when): void
    {
        foreach ($hosts as $host) {
            $snapshot = $host->snapshot()['snapshot'];
            foreach ($services as $service) {
                [$failures, $successes] = $this->counted[$service];
                $fleet = $snapshot[$service]['fleet'] ?? null;
                $view = $fleet === null ? null : [$fleet['failures'], $fleet['successes'], $fleet['rejections']];
                self::assertSame([$failures, $successes, 0], $view, "{$host->name}'s view of {$service} {$when}:\n" . $this->logs());
            }
        }
    }

    /**
     * Three hosts counting in a 60 s window, h3 on a clock the test steps (SkewedClock::step on
     * the file returned), or the test skipped where the shim cannot be built.
     *
     * @return array{list<FleetHost>, string}
     */
    private function startHostsWithASteppableH3(): array
    {
        self::skipWithoutSkewedClock();
        $clock = "{$this->dir}/h3.clock";
        $ganesha = ['timeWindow' => 60, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];

        return [$this->startHosts(3, $ganesha, null, [], [], ['h3' => SkewedClock::steppable($this->dir, $clock)]), $clock];
    }

    private static function skipWithoutSkewedClock(): void
    {
        $missing = SkewedClock::unavailable();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }
}
