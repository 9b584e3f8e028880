<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha\Storage\StorageKeys;
use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * What an operator reads and does, through the real Ganesha: snapshot() and metrics() keep
 * every service apart whatever the bytes of its name, and resetService() closes one circuit
 * and touches nothing else.
 */
final class OperatorTest extends GaneshaTestCase
{
    public function testServicesWhoseNamesAreNotUtf8StayApart(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(60, adapter: $adapter);
        $base = Unique::name('names.');
        // Two names a lossy UTF-8 decoding makes one, and a name that reads like an escape.
        $services = [$base . "\xff" => 1, $base . "\xfe" => 2, $base . '\\xFF' => 3, $base . "\xc3" => 4];
        foreach ($services as $service => $successes) {
            for ($i = 0; $i < $successes; $i++) {
                $ganesha->success($service);
            }
        }

        $snapshot = $adapter->snapshot();
        foreach ($services as $service => $successes) {
            self::assertArrayHasKey($service, $snapshot, 'keyed by the bytes of the name');
            self::assertSame($service, $snapshot[$service]['service']);
            self::assertSame($successes, $snapshot[$service]['successes']);
            self::assertTrue(\mb_check_encoding($snapshot[$service]['display_name'], 'UTF-8'));
        }
        self::assertSame($base . '\\xFF', $snapshot[$base . "\xff"]['display_name']);
        self::assertSame($base . '\\xFE', $snapshot[$base . "\xfe"]['display_name']);
        self::assertSame($base . '\\\\xFF', $snapshot[$base . '\\xFF']['display_name']);
        $shown = \array_map(static fn (array $row): string => $row['display_name'], $snapshot);
        self::assertCount(\count($snapshot), \array_unique($shown), 'no two services share a display name');

        $metrics = $adapter->metrics();
        $series = [];
        foreach (\explode("\n", $metrics) as $line) {
            if ($line !== '' && $line[0] !== '#') {
                $name = \substr($line, 0, (int) \strrpos($line, ' '));
                self::assertArrayNotHasKey($name, $series, "a series written twice: {$name}");
                $series[$name] = true;
            }
        }
        foreach ($services as $service => $successes) {
            $label = \str_replace(['\\', '"', "\n"], ['\\\\', '\\"', '\\n'], $snapshot[$service]['display_name']);
            self::assertStringContainsString("ganesha_shm_requests{service=\"{$label}\",outcome=\"success\"} {$successes}\n", $metrics);
        }
    }

    public function testAServiceNamedLikeAnIntegerIsFoundUnderThatKey(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(60, adapter: $adapter);
        $service = (string) \random_int(1_000_000, 9_999_999);
        $ganesha->failure($service);

        $snapshot = $adapter->snapshot();
        self::assertArrayHasKey($service, $snapshot);
        self::assertSame(1, $snapshot[$service]['failures']);
        self::assertSame($service, $snapshot[(int) $service]['service']);
    }

    /**
     * A service that tripped once, recovered, and then serves a success every second for 100 s
     * keeps every total, although its failure and rejection data expired long ago and new
     * services sweep the store (4 services in all, a 4 s window: the expired slots are the
     * first the sweep would free). Its totals are Prometheus counters: dropping any of them
     * while the service is busy would read as a counter reset.
     */
    public function testABusyServiceKeepsEveryTotalWhileItsOtherDataExpires(): void
    {
        $code = Php::autoloadCode(true) . \sprintf(
            ' require %s;
            use %s as Clock;
            Clock::freeze(1800000000);
            $adapter = new \%s(null, Clock::callable());
            $g = \%s::withRateStrategy()->adapter($adapter)->timeWindow(4)->failureRateThreshold(50)
                ->minimumRequests(1)->intervalToHalfOpen(1)->build();
            $g->failure("busy");                          // trips
            $g->isAvailable("busy");                      // a rejection
            Clock::sleep(2);
            $trial = $g->isAvailable("busy");             // the half-open trial
            $g->success("busy");
            for ($i = 0; $i < 100; $i++) {
                Clock::sleep(1);
                if ($g->isAvailable("busy")) { $g->success("busy"); }
            }
            $r = ["trial" => $trial, "before" => $adapter->snapshot()["busy"]["totals"]];
            for ($i = 0; $i < 3; $i++) { $g->success("other" . $i); $g->failure("other" . $i); }
            $r["after"] = $adapter->snapshot()["busy"]["totals"];
            $r["others"] = array_map(fn ($row) => $row["totals"]["successes"], array_diff_key($adapter->snapshot(), ["busy" => 0]));
            echo json_encode($r);',
            \var_export(\dirname(__DIR__) . '/Support/virtual_clock_functions.php', true),
            VirtualClock::class,
            SlidingTimeWindowShm::class,
            Builder::class
        );
        $result = Php::json($code, ['ganesha_shm.max_services' => 4]);

        self::assertTrue($result['trial']);
        $before = $result['before'];
        self::assertSame(['failures' => 1, 'trips' => 1, 'calm_downs' => 1, 'half_open_trials' => 1], \array_diff_key($before, ['successes' => 0, 'rejections' => 0]));
        self::assertGreaterThanOrEqual(1, $before['rejections']);
        self::assertGreaterThanOrEqual(95, $before['successes'], 'a success nearly every second');
        self::assertSame($before, $result['after'], 'no total of the busy service went with its expired data');
        self::assertSame(['other0' => 1, 'other1' => 1, 'other2' => 1], $result['others'], 'the new services were stored');
    }

    /**
     * A tripped service's counters are kept as long as its status, one day, and then no
     * longer: their slots are reusable when the status's slot is, 1/16 of a day after the
     * status expired. They were kept 1/16 of that day more again, so that a new service could
     * store its status but not its counters for another 1.6 hours.
     */
    public function testATrippedServicesCountersAreReusableWhenItsStatusIs(): void
    {
        $code = Php::autoloadCode(true) . \sprintf(
            ' require %s;
            use %s as Clock;
            $t0 = 1800000000;
            Clock::freeze($t0);
            $a = new \%s(null, Clock::callable());
            \%s::withRateStrategy()->adapter($a)->timeWindow(60)->failureRateThreshold(50)
                ->minimumRequests(10)->intervalToHalfOpen(5)->build();
            foreach ([0, 1] as $second) {
                Clock::freeze($t0 + $second);
                $a->saveStatus("ganesha_a_status", 2);
                foreach (["success", "failure", "rejection"] as $counter) { $a->increment("ganesha_a_" . $counter); }
                $a->saveLastFailureTime("ganesha_a_failure", $t0 + $second);
            }
            $r = [];
            // The status saved at t0 + 1 renewed its slot until t0 + 1 + 86400 + 86400 / 16.
            foreach ([86400, 91801, 91802, 95000] as $after) {
                Clock::freeze($t0 + $after);
                try { $a->increment("ganesha_b_failure"); $r[$after] = "stored"; }
                catch (\Throwable $e) { $r[$after] = get_class($e) . ": " . $e->getMessage(); }
            }
            echo json_encode($r);',
            \var_export(\dirname(__DIR__) . '/Support/virtual_clock_functions.php', true),
            VirtualClock::class,
            SlidingTimeWindowShm::class,
            Builder::class
        );
        $result = Php::json($code, ['ganesha_shm.max_services' => 1]);

        self::assertStringContainsString('StorageException: ', $result['86400'], 'the status holds the service one day');
        self::assertStringContainsString('ganesha_shm.max_services', $result['91801'], 'and 1/16 of a day more, the margin of its slot');
        self::assertSame('stored', $result['91802'], 'then the counters go with it');
        self::assertSame('stored', $result['95000']);
    }

    public function testTotalsCountTripsCalmDownsAndTrialsThroughGanesha(): void
    {
        $t0 = 1_800_000_000;
        $adapter = self::virtualAdapter($t0);
        $ganesha = $this->ganesha(10, minimumRequests: 2, intervalToHalfOpen: 5, adapter: $adapter);
        $service = self::service('totals');
        $totals = static fn (): array => $adapter->snapshot()[$service]['totals'];
        $ganesha->success($service);
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertSame(['tripped'], $this->eventsOf($service));
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame(['successes' => 1, 'failures' => 2, 'rejections' => 1, 'trips' => 1, 'calm_downs' => 0, 'half_open_trials' => 0], $totals());

        VirtualClock::sleep(6);   // a trial is due
        self::assertTrue($ganesha->isAvailable($service), 'the half-open trial');
        self::assertFalse($ganesha->isAvailable($service), 'one trial only');
        $ganesha->failure($service);   // the trial failed: still open, no second trip
        self::assertSame(1, $totals()['trips']);
        self::assertSame(1, $totals()['half_open_trials']);

        VirtualClock::sleep(11);   // the failures left the window: a success calms it down
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->success($service);
        self::assertSame(['tripped', 'calmed_down'], $this->eventsOf($service));
        self::assertSame(['successes' => 2, 'failures' => 3, 'rejections' => 2, 'trips' => 1, 'calm_downs' => 1, 'half_open_trials' => 1], $totals(), 'closed by its rate: no trial');
        self::assertStringContainsString("ganesha_shm_trips_total{service=\"{$service}\"} 1\n", $adapter->metrics());
        self::assertStringContainsString("ganesha_shm_requests_total{service=\"{$service}\",outcome=\"failure\"} 3\n", $adapter->metrics());
    }

    public function testTheWindowsBucketsAreListedOldestFirst(): void
    {
        $t0 = 1_800_000_000;   // a multiple of 10: buckets of 2 s start at even seconds
        $adapter = self::virtualAdapter($t0, 2);
        $ganesha = $this->ganesha(10, minimumRequests: 100, adapter: $adapter);
        $service = self::service('buckets');
        $ganesha->success($service);
        $ganesha->success($service);
        VirtualClock::sleep(4);
        $ganesha->failure($service);
        VirtualClock::sleep(5);   // t0 + 9: the window's 5 buckets start at t0 + 0 … t0 + 8
        $ganesha->failure($service);
        $ganesha->success($service);

        $row = $adapter->snapshot(true)[$service];
        self::assertSame(\range($t0, $t0 + 8, 2), \array_column($row['buckets'], 'start'));
        self::assertSame([0, 0, 1, 0, 1], \array_column($row['buckets'], 'failures'));
        self::assertSame([2, 0, 0, 0, 1], \array_column($row['buckets'], 'successes'));
        self::assertSame([0, 0, 0, 0, 0], \array_column($row['buckets'], 'rejections'));
        self::assertSame($row['failures'], \array_sum(\array_column($row['buckets'], 'failures')));
        self::assertArrayNotHasKey('buckets', $adapter->snapshot()[$service], 'only when asked for');

        VirtualClock::sleep(2);   // t0 + 11: the bucket of t0 left the window
        self::assertSame([0, 1, 0, 1, 0], \array_column($adapter->snapshot(true)[$service]['buckets'], 'failures'));
    }

    public function testResetServiceClosesOneCircuitAndLeavesTheOthers(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(60, minimumRequests: 3, adapter: $adapter);
        $mended = Unique::name('mended.');
        $failing = Unique::name('failing.');
        foreach ([$mended, $failing] as $service) {
            for ($i = 0; $i < 3; $i++) {
                $ganesha->failure($service);
            }
            self::assertFalse($ganesha->isAvailable($service), "{$service} did not trip");
        }
        $before = $adapter->snapshot()[$failing];

        $trips = $adapter->snapshot()[$mended]['totals']['trips'];
        self::assertSame(1, $trips);

        $adapter->resetService($mended);

        $row = $adapter->snapshot()[$mended];
        self::assertSame(
            ['state' => 'closed', 'status' => 1, 'failures' => 0, 'successes' => 0, 'rejections' => 0, 'last_failure_time' => null],
            \array_intersect_key($row, \array_flip(['state', 'status', 'failures', 'successes', 'rejections', 'last_failure_time'])),
            'nothing of the service is left but its totals',
        );
        self::assertSame(['successes' => 0, 'failures' => 3, 'rejections' => 1, 'trips' => 1, 'calm_downs' => 0, 'half_open_trials' => 0], $row['totals'], 'the totals go on');
        self::assertTrue($ganesha->isAvailable($mended), 'the circuit admits at once');
        $ganesha->success($mended);
        self::assertTrue($ganesha->isAvailable($mended));
        self::assertSame($before, $adapter->snapshot()[$failing], 'the other service is untouched');
        self::assertFalse($ganesha->isAvailable($failing), 'the other circuit is still open');
        self::assertSame(2, $adapter->loadStatus(StorageKeys::KEY_PREFIX . $failing . StorageKeys::KEY_SUFFIX_STATUS));
    }
}
