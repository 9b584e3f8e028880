<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Forks;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * The adapter behind Ganesha's Builder::withCountStrategy(): failures increment the failure
 * count, successes decrement it, the circuit trips at failureCountThreshold and calms down when
 * the count is back to 0. Time passes on the VirtualClock.
 */
final class CountStrategyTest extends GaneshaTestCase
{
    public function testTheCircuitTripsAtTheFailureCountThreshold(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->countGanesha(failureCountThreshold: 3, adapter: $adapter);
        $service = self::service();
        $other = self::service();

        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        self::assertSame([], $this->eventsOf($service));

        $ganesha->failure($service);
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        self::assertFalse($ganesha->isAvailable($service));
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame(3, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame(Ganesha::STATUS_TRIPPED, $adapter->loadStatus("ganesha_{$service}_status"));

        $ganesha->failure($service);
        self::assertSame(4, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service), 'tripped once');
        self::assertTrue($ganesha->isAvailable($other));
        self::assertSame(0, $adapter->load("ganesha_{$service}_rejection"), 'the Count strategy counts no rejections');
    }

    public function testSuccessesBringTheCountDownToZeroAndNoFurther(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->countGanesha(failureCountThreshold: 3, adapter: $adapter);
        $service = self::service();
        $key = "ganesha_{$service}_failure";

        $ganesha->failure($service);
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        $ganesha->success($service);
        self::assertSame(2, $adapter->load($key));
        self::assertTrue($ganesha->isAvailable($service), 'below the threshold the circuit lets requests through');
        self::assertSame(Ganesha::STATUS_TRIPPED, $adapter->loadStatus("ganesha_{$service}_status"), 'not calmed down before 0');

        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        $ganesha->success($service);
        self::assertSame(0, $adapter->load($key));
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));

        for ($i = 0; $i < 20; ++$i) {
            $ganesha->success($service);
        }
        self::assertSame(0, $adapter->load($key), 'never below 0');
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service), 'calmed down once');

        // 3 failures trip it again: the successes beyond 0 were not kept as a negative count
        $ganesha->failure($service);
        self::assertSame(1, $adapter->load($key));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN, Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    public function testSuccessesOfANewServiceStoreNothing(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->countGanesha(failureCountThreshold: 3, adapter: $adapter);
        $service = self::service();
        $used = \ganesha_shm_info()['counter_slots_used'];

        for ($i = 0; $i < 5; ++$i) {
            $ganesha->success($service);
        }

        self::assertSame($used, \ganesha_shm_info()['counter_slots_used']);
        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame([], $this->events);
        $ganesha->failure($service);
        self::assertSame(1, $adapter->load("ganesha_{$service}_failure"));
    }

    public function testOneTrialRequestPerIntervalToHalfOpen(): void
    {
        $adapter = self::virtualAdapter(\time());
        $ganesha = $this->countGanesha(failureCountThreshold: 2, intervalToHalfOpen: 10, adapter: $adapter);
        $service = self::service();
        $key = "ganesha_{$service}_failure";

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        VirtualClock::sleep(10);
        self::assertFalse($ganesha->isAvailable($service), 'at +10 s the interval to half-open has not passed');

        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service), 'the first request after the interval is a trial');
        self::assertFalse($ganesha->isAvailable($service), 'one trial per interval');
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame(2, $adapter->load($key), 'Ganesha set the count to the threshold for the trial');

        // the trial failed: the circuit stays open, for another interval
        $ganesha->failure($service);
        self::assertSame(3, $adapter->load($key));
        VirtualClock::sleep(10);
        self::assertFalse($ganesha->isAvailable($service));
        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service), 'the next trial');
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame(2, $adapter->load($key), 'the trial set the count back to the threshold');
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    public function testTheCircuitRecoversWhenTheCountIsBackToZero(): void
    {
        $adapter = self::virtualAdapter(\time());
        $ganesha = $this->countGanesha(failureCountThreshold: 3, intervalToHalfOpen: 10, adapter: $adapter);
        $service = self::service();

        for ($i = 0; $i < 5; ++$i) {
            $ganesha->failure($service);
        }
        self::assertFalse($ganesha->isAvailable($service));

        VirtualClock::sleep(11);
        self::assertTrue($ganesha->isAvailable($service), 'the trial');
        $ganesha->success($service);
        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"), 'the threshold, minus the trial\'s success');
        self::assertTrue($ganesha->isAvailable($service), 'below the threshold');
        self::assertTrue($ganesha->isAvailable($service));

        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertTrue($ganesha->isAvailable($service));
        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
    }

    public function testATrippedCircuitIsForgottenCountTtlAfterItsLastFailure(): void
    {
        $adapter = self::virtualAdapter(\time());
        $ganesha = $this->countGanesha(failureCountThreshold: 2, intervalToHalfOpen: 2 * AbstractSlidingTimeWindowShm::COUNT_TTL, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        VirtualClock::sleep(AbstractSlidingTimeWindowShm::COUNT_TTL);
        self::assertFalse($ganesha->isAvailable($service), 'kept COUNT_TTL');
        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"));

        VirtualClock::sleep(1);
        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
        self::assertNull($adapter->loadLastFailureTime("ganesha_{$service}_failure"));
        self::assertTrue($ganesha->isAvailable($service), 'the count expired with its last write');
    }

    public function testResetClosesTrippedCircuits(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->countGanesha(failureCountThreshold: 2, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        $ganesha->reset();

        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
        self::assertNull($adapter->loadLastFailureTime("ganesha_{$service}_failure"));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
        self::assertTrue($ganesha->isAvailable($service));

        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    /**
     * @requires extension pcntl
     * @requires extension posix
     */
    #[RequiresPhpExtension('pcntl')]
    #[RequiresPhpExtension('posix')]
    public function testConcurrentFailuresAndSuccessesAreExact(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->countGanesha(failureCountThreshold: 100_000, adapter: $adapter);
        $service = self::service();
        $adapter->save("ganesha_{$service}_failure", 1000);

        // 500 failures (increments) and 500 successes (decrements) each, interleaved: the count
        // stays within 1000 +/- 4, far from the floor at 0
        $statuses = Forks::run(4, function (int $child) use ($ganesha, $service): int {
            for ($i = 0; $i < 500; ++$i) {
                if ($child % 2 === 0) {
                    $ganesha->failure($service);
                    $ganesha->success($service);
                } else {
                    $ganesha->success($service);
                    $ganesha->failure($service);
                }
            }

            return $this->events === [] ? 0 : 2;
        });

        self::assertSame([0, 0, 0, 0], $statuses, 'exit statuses: 1 = exception, 2 = Ganesha notified an event');
        self::assertSame(1000, $adapter->load("ganesha_{$service}_failure"));
        self::assertTrue($ganesha->isAvailable($service));
    }
}
