<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Clock;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * The circuit over time. On the VirtualClock, which Ganesha and the adapter both read, time
 * passes without waiting; one test lets real time pass, aligned to second boundaries of time().
 */
final class SlidingWindowTest extends GaneshaTestCase
{
    public function testGaneshaAndTheAdapterReadTheVirtualClock(): void
    {
        $adapter = self::virtualAdapter(2_000_000_000);
        $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 100, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);

        $reader = new SlidingTimeWindowShm(null, VirtualClock::callable());
        $this->ganesha(timeWindow: 60, intervalToHalfOpen: \PHP_INT_MAX, adapter: $reader);
        self::assertSame(2_000_000_000, $reader->loadLastFailureTime("ganesha_{$service}_failure"), 'Ganesha saved its time(): the frozen time');
        self::assertSame(1, $adapter->load("ganesha_{$service}_failure"));

        VirtualClock::sleep(61);
        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"), '61 s later the failure left the window');
        self::assertSame(0, $this->loadAtSystemTime($service), 'at the system\'s time, years away, nothing was counted');
    }

    public function testFailuresStraddlingATumblingBoundaryTripTheCircuit(): void
    {
        // 4 requests at least, half of them failures, within 4 s: 2 failures in the last second
        // of one tumbling window of 4 s and 2 in the first second of the next trip the sliding
        // window, though neither tumbling window holds the 4 requests needed
        $boundary = (\intdiv(\time(), 4) + 1) * 4;
        $adapter = self::virtualAdapter($boundary - 1);
        $ganesha = $this->ganesha(timeWindow: 4, failureRateThreshold: 50, minimumRequests: 4, adapter: $adapter);
        $service = self::service();

        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service), '2 failures in a window are fewer than the minimum requests');

        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service), '3 failures in the window');
        self::assertSame([], $this->eventsOf($service));
        $ganesha->failure($service);

        self::assertNotSame(
            \intdiv($boundary - 1, 4),
            \intdiv($boundary, 4),
            'the failures straddle two tumbling windows of 4 s'
        );
        self::assertFalse($ganesha->isAvailable($service), '4 failures within 4 s trip the circuit');
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));

        // the window slides bucket by bucket
        VirtualClock::sleep(2);
        self::assertSame(4, $adapter->load("ganesha_{$service}_failure"), 'at +3 s the 4 failures are in the window');
        self::assertFalse($ganesha->isAvailable($service));
        VirtualClock::sleep(1);
        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"), 'at +4 s the failures of the first second left the window');
        VirtualClock::sleep(1);
        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
        self::assertTrue($ganesha->isAvailable($service), 'at +5 s the failures left the window');
    }

    public function testTheCircuitRecoversOnceTheFailuresLeaveTheWindow(): void
    {
        // a time window of 2 s in buckets of 1 s
        $adapter = self::virtualAdapter(\time());
        $ganesha = $this->ganesha(timeWindow: 2, minimumRequests: 2, intervalToHalfOpen: 600, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_TRIPPED, $adapter->loadStatus("ganesha_{$service}_status"));

        VirtualClock::sleep(1);
        self::assertFalse($ganesha->isAvailable($service), 'at +1 s the failures are in the window');

        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service), 'at +2 s the failures left the window');
        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
        self::assertTrue($ganesha->isAvailable($service));

        foreach ($this->events as [, , $message]) {
            self::assertSame('', $message);
        }
    }

    public function testOneTrialRequestPerIntervalToHalfOpen(): void
    {
        $adapter = self::virtualAdapter(\time());
        $ganesha = $this->ganesha(timeWindow: 30, minimumRequests: 2, intervalToHalfOpen: 1, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        VirtualClock::sleep(1);
        self::assertFalse($ganesha->isAvailable($service), 'at +1 s the interval to half-open has not passed');

        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service), 'the first request after the interval is a trial');
        self::assertFalse($ganesha->isAvailable($service), 'one trial per interval');
        self::assertFalse($ganesha->isAvailable($service));

        VirtualClock::sleep(1);
        self::assertFalse($ganesha->isAvailable($service), 'the trial restarted the interval');
        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service), 'the next trial, one interval after the first');
        self::assertFalse($ganesha->isAvailable($service));

        // the trial failed: the circuit stays open, the failure restarts the interval
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        VirtualClock::sleep(1);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));

        // a trial that succeeds closes the circuit
        VirtualClock::sleep(1);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
    }

    public function testOneTrialRequestPerIntervalToHalfOpenInRealTime(): void
    {
        // end to end on the system clock: Ganesha's own time() and the adapter's
        self::assertFalse(VirtualClock::isFrozen());
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(timeWindow: 30, minimumRequests: 2, intervalToHalfOpen: 1, adapter: $adapter);
        $service = self::service();

        $t0 = Clock::nextSecond();
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        self::assertSame($t0, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 1);
        self::assertFalse($ganesha->isAvailable($service), 'at +1 s the interval to half-open has not passed');
        self::assertSame($t0 + 1, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 2);
        self::assertTrue($ganesha->isAvailable($service), 'the first request after the interval is a trial');
        self::assertFalse($ganesha->isAvailable($service), 'one trial per interval');
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame($t0 + 2, \time(), 'the clock passed a second: the machine is too slow for this test');

        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
    }

    private function loadAtSystemTime(string $service): int
    {
        $adapter = new SlidingTimeWindowShm();
        $this->ganesha(timeWindow: 60, adapter: $adapter);

        return $adapter->load("ganesha_{$service}_failure");
    }
}
