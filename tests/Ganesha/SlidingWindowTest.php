<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Clock;

/**
 * The circuit over time, with real time passing: aligned to second boundaries of time().
 */
final class SlidingWindowTest extends GaneshaTestCase
{
    public function testFailuresStraddlingATumblingBoundaryTripTheCircuit(): void
    {
        // 4 requests at least, half of them failures, within 4 s: 2 failures in the last second
        // of one tumbling window of 4 s and 2 in the first second of the next trip the sliding
        // window, though neither tumbling window holds the 4 requests needed
        $ganesha = $this->ganesha(timeWindow: 4, failureRateThreshold: 50, minimumRequests: 4);
        $service = self::service();

        $boundary = Clock::nextSecondWhere(4, 3) + 1;
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service), '2 failures in a window are fewer than the minimum requests');
        self::assertSame($boundary - 1, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($boundary);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service), '3 failures in the window');
        self::assertSame([], $this->eventsOf($service));
        $ganesha->failure($service);
        self::assertSame($boundary, \time(), 'the clock passed a second: the machine is too slow for this test');

        self::assertNotSame(
            (int) \floor(($boundary - 1) / 4),
            (int) \floor($boundary / 4),
            'the failures straddle two tumbling windows of 4 s'
        );
        self::assertFalse($ganesha->isAvailable($service), '4 failures within 4 s trip the circuit');
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    public function testTheCircuitRecoversOnceTheFailuresLeaveTheWindow(): void
    {
        // a time window of 2 s in buckets of 1 s
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(timeWindow: 2, minimumRequests: 2, intervalToHalfOpen: 600, adapter: $adapter);
        $service = self::service();

        $t0 = Clock::nextSecond();
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_TRIPPED, $adapter->loadStatus('ganesha_' . $service . '_status'));
        self::assertSame($t0, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 1);
        self::assertFalse($ganesha->isAvailable($service), 'at +1 s the failures are in the window');
        self::assertSame($t0 + 1, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 2);
        self::assertTrue($ganesha->isAvailable($service), 'at +2 s the failures left the window');
        $ganesha->success($service);
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_CALMED_DOWN], $this->eventsOf($service));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus('ganesha_' . $service . '_status'));
        self::assertTrue($ganesha->isAvailable($service));
        self::assertSame($t0 + 2, \time(), 'the clock passed a second: the machine is too slow for this test');

        foreach ($this->events as [, , $message]) {
            self::assertSame('', $message);
        }
    }

    public function testOneTrialRequestPerIntervalToHalfOpen(): void
    {
        $ganesha = $this->ganesha(timeWindow: 30, minimumRequests: 2, intervalToHalfOpen: 1);
        $service = self::service();

        $t0 = Clock::nextSecond();
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame($t0, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 1);
        self::assertFalse($ganesha->isAvailable($service), 'at +1 s the interval to half-open has not passed');

        Clock::sleepUntil($t0 + 2);
        self::assertTrue($ganesha->isAvailable($service), 'the first request after the interval is a trial');
        self::assertFalse($ganesha->isAvailable($service), 'one trial per interval');
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame($t0 + 2, \time(), 'the clock passed a second: the machine is too slow for this test');

        // the trial failed: the circuit stays open, the failure restarts the interval
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }
}
