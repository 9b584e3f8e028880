<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\Clock;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * One circuit for the whole pool: failures reported by requests that different workers served
 * add up, the circuit trips on the minimumRequests-th of them, every worker then rejects, one
 * trial is let through once intervalToHalfOpen has passed, and the circuit closes for every
 * worker when the failures have left the time window.
 */
final class CircuitTest extends FpmTestCase
{
    private const WINDOW = 5;

    private const INTERVAL = 2;

    private const MINIMUM = 10;

    private const WORKERS = 4;

    /**
     * The real Ganesha, built by each request over SlidingTimeWindowShm, on the real clock (the
     * failures start at the beginning of a second and must fall within two consecutive seconds;
     * the waits are counted from the last one): failures rate 100 %,
     * minimumRequests 10, time window 5 s (buckets of 1 s: at second s, load() counts seconds
     * s-4 to s), intervalToHalfOpen 2 s (Ganesha admits a trial when more than 2 s passed).
     */
    public function testGaneshaTripsOnceForThePoolAndRecovers(): void
    {
        self::requireGanesha();
        $server = $this->startFpm(maxChildren: self::WORKERS);
        $circuit = ['service' => Unique::name('circuit.'), 'window' => self::WINDOW, 'threshold' => 50, 'minimum' => self::MINIMUM, 'interval' => self::INTERVAL];
        $failures = [];

        Clock::nextSecond();
        // 9 failures: twice one from each worker at once, then one more
        foreach ([...self::everyWorker($server, self::ganesha(), ['op' => 'failure'] + $circuit), ...self::everyWorker($server, self::ganesha(), ['op' => 'failure'] + $circuit)] as $answer) {
            $failures[] = $answer;
        }
        $failures[] = $server->json(self::ganesha(), ['op' => 'failure'] + $circuit);
        self::assertSame([], \array_merge(...\array_column($failures, 'events')), 'no event before the 10th failure');

        foreach (self::everyWorker($server, self::ganesha(), ['op' => 'available'] + $circuit) as $pid => $answer) {
            self::assertTrue($answer['available'], "after 9 failures worker {$pid} still lets requests through");
        }

        $failures[] = $last = $server->json(self::ganesha(), ['op' => 'failure'] + $circuit);
        self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $last['events'], 'the 10th failure, counted across the workers, trips the circuit');
        self::assertSame($last['time'], \max(\array_column($failures, 'time')));
        self::assertLessThanOrEqual(1, $last['time'] - \min(\array_column($failures, 'time')), 'the failures took more than a second: the machine is too slow for this test');
        self::assertGreaterThanOrEqual(self::WORKERS, \count(\array_unique(\array_column($failures, 'pid'))), 'failures from every worker');

        foreach (self::everyWorker($server, self::ganesha(), ['op' => 'available'] + $circuit) as $pid => $answer) {
            self::assertFalse($answer['available'], "worker {$pid} rejects once the circuit tripped");
            self::assertSame([], $answer['events']);
        }

        // 3 s after the last failure: every failure is still in the window (seconds
        // last-1..last+3), more than 2 s passed: one trial, whichever worker asks first
        Clock::sleepUntil($last['time'] + self::INTERVAL + 1);
        $admitted = [];
        foreach (self::everyWorker($server, self::ganesha(), ['op' => 'trial'] + $circuit) as $pid => $answer) {
            if ($answer['available']) {
                $admitted[] = $pid;
                self::assertSame([[Ganesha::EVENT_CALMED_DOWN, $circuit['service'], '']], $answer['events'], 'the trial\'s success calms the circuit down');
            } else {
                self::assertSame([], $answer['events']);
            }
        }
        self::assertCount(1, $admitted, 'one trial for the whole pool');
        $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot'] + $circuit)['snapshot'];
        self::assertSame(
            [self::MINIMUM, 1, self::WORKERS + self::WORKERS - 1, Ganesha::STATUS_CALMED_DOWN],
            [$snapshot['failures'], $snapshot['successes'], $snapshot['rejections'], $snapshot['status']],
            'failures, successes, rejections, status'
        );

        // 5 s after the last failure: it left the window (seconds last+1..last+5)
        Clock::sleepUntil($last['time'] + self::WINDOW);
        foreach (self::everyWorker($server, self::ganesha(), ['op' => 'available'] + $circuit) as $pid => $answer) {
            self::assertTrue($answer['available'], "worker {$pid} lets requests through again");
            self::assertSame([], $answer['events']);
        }
    }

    /**
     * Without Ganesha, the same story through the native class, on a fixed clock: the failure
     * count and the status are the pool's, and of the workers that read the last failure time
     * at once after the interval, exactly one is given the trial (the stored time).
     */
    public function testTheNativeCountersStatusAndTrialAreThePools(): void
    {
        $server = $this->startFpm(maxChildren: self::WORKERS);
        $service = Unique::name('native.');
        $failureKey = "ganesha_{$service}_failure";
        $statusKey = "ganesha_{$service}_status";
        $failedAt = \time();
        $at = ['now' => $failedAt, 'interval' => self::INTERVAL];
        $read = ['op' => 'load', 'keys' => [$failureKey], 'statuses' => [$statusKey]] + $at;

        self::everyWorker($server, self::native(), ['op' => 'failure', 'service' => $service] + $at);
        self::everyWorker($server, self::native(), ['op' => 'failure', 'service' => $service] + $at);
        $server->json(self::native(), ['op' => 'failure', 'service' => $service] + $at);
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([[$failureKey => 9], [$statusKey => 1]], [$answer['counts'], $answer['statuses']], "worker {$pid}: 9 failures, calmed down (nothing stored)");
        }

        $server->json(self::native(), ['op' => 'failure', 'service' => $service] + $at);
        $server->json(self::native(), ['op' => 'save_status', 'key' => $statusKey, 'status' => 2] + $at);
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([[$failureKey => self::MINIMUM], [$statusKey => 2]], [$answer['counts'], $answer['statuses']], "worker {$pid}: 10 failures, tripped");
        }

        $later = $failedAt + self::INTERVAL + 1;
        $claims = [];
        foreach (self::everyWorker($server, self::native(), ['op' => 'claim', 'key' => $failureKey, 'now' => $later, 'interval' => self::INTERVAL]) as $answer) {
            $claims[] = $answer['last_failure_time'];
        }
        \sort($claims);
        self::assertSame([$failedAt, $later, $later, $later], $claims, 'one worker is given the stored time (the trial), the others the time it claimed');

        $server->json(self::native(), ['op' => 'save_status', 'key' => $statusKey, 'status' => 1] + $at);
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([$statusKey => 1], $answer['statuses'], "worker {$pid}: calmed down");
        }
    }
}
