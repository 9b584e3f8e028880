<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * A full store makes Ganesha emit storage_error and fail open, while the circuits it holds keep
 * working. In a child process with -d ganesha_shm.max_services=1: 3 counter keys, 1 status key.
 */
final class StoreFullTest extends GaneshaTestCase
{
    /** @var array<string, mixed> */
    private static array $result;

    protected function setUp(): void
    {
        parent::setUp();
        if (!isset(self::$result)) {
            self::$result = Php::json(Php::autoloadCode(true) . \sprintf(
                ' $adapter = new \\%s();
                $g = \\%s::withRateStrategy()->adapter($adapter)->timeWindow(60)->failureRateThreshold(50)
                    ->minimumRequests(2)->intervalToHalfOpen(600)->build();
                $events = [];
                $g->subscribe(function ($e, $s, $m) use (&$events) { $events[] = [$e, $s, $m]; });
                // service b: failure key (count and last failure time) and status key
                $g->failure("b"); $g->failure("b");
                $r = ["events_b" => $events]; $events = [];
                // two more counter keys: the 3 counter slots are used
                $adapter->increment("filler1"); $adapter->increment("filler2");
                $r["info"] = ganesha_shm_info();
                // b is tripped and its next rejection needs a new key: Ganesha fails open
                $r["b_available"] = $g->isAvailable("b");
                $r["events_b_full"] = $events; $events = [];
                // a new service
                $g->failure("c"); $g->failure("c");
                $r["c_available"] = $g->isAvailable("c");
                $g->success("c");
                $r["events_c"] = $events; $events = [];
                $r["b_failures"] = $adapter->load("ganesha_b_failure");
                $r["b_status"] = $adapter->loadStatus("ganesha_b_status");
                try { $adapter->increment("ganesha_d_failure"); $r["direct"] = null; }
                catch (\\Throwable $e) { $r["direct"] = [get_class($e), $e->getMessage()]; }
                $r["info_after"] = ganesha_shm_info();
                echo json_encode($r);',
                SlidingTimeWindowShm::class,
                Builder::class
            ), ['ganesha_shm.max_services' => 1]);
        }
    }

    public function testTheCircuitTripsWhileThereIsRoom(): void
    {
        self::assertSame([[Ganesha::EVENT_TRIPPED, 'b', '']], self::$result['events_b']);
        self::assertSame(1, self::$result['info']['max_services']);
        self::assertSame(3, self::$result['info']['counter_slots_used']);
        self::assertSame(1, self::$result['info']['status_slots_used']);
        self::assertSame(0, self::$result['info']['full_errors']);
    }

    public function testATrippedCircuitFailsOpenWhenItsRejectionCannotBeStored(): void
    {
        self::assertTrue(self::$result['b_available'], 'Ganesha fails open on a storage error');
        self::assertCount(1, self::$result['events_b_full']);
        [$event, $service, $message] = self::$result['events_b_full'][0];
        self::assertSame(Ganesha::EVENT_STORAGE_ERROR, $event);
        self::assertSame('b', $service);
        self::assertStringStartsWith('failed to isAvailable', $message);
        self::assertStringContainsString('ganesha_shm.max_services', $message);
    }

    public function testANewServiceGetsStorageErrorsAndStaysAvailable(): void
    {
        self::assertTrue(self::$result['c_available']);
        $events = self::$result['events_c'];
        self::assertNotEmpty($events);
        foreach ($events as [$event, $service, $message]) {
            self::assertSame(Ganesha::EVENT_STORAGE_ERROR, $event);
            self::assertSame('c', $service);
            self::assertStringContainsString('ganesha_shm.max_services', $message);
        }
        self::assertStringStartsWith('failed to record failure', $events[0][2]);
        self::assertStringStartsWith('failed to record success', $events[\count($events) - 1][2]);
    }

    public function testTheStoredCircuitKeepsItsData(): void
    {
        self::assertSame(2, self::$result['b_failures']);
        self::assertSame(Ganesha::STATUS_TRIPPED, self::$result['b_status']);
    }

    public function testTheAdapterThrowsGaneshasStorageException(): void
    {
        self::assertSame(Ganesha\Exception\StorageException::class, self::$result['direct'][0]);
        self::assertStringContainsString('ganesha_shm.max_services', self::$result['direct'][1]);
        self::assertGreaterThanOrEqual(4, self::$result['info_after']['full_errors']);
    }
}
