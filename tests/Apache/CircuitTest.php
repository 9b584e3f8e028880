<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * One circuit for every child of an Apache parent: failures reported by requests that different
 * children served add up, the circuit trips on the minimumRequests-th of them, every child then
 * rejects, one trial is let through once intervalToHalfOpen has passed, and the circuit closes
 * for every child when the failures have left the time window.
 *
 * The requests give Ganesha and the adapter a fixed time (the tests' VirtualClock, through the
 * query), so that the test moves through the interval and the window without sleeping: the
 * children and their shared counters are real; only the time they read is set by the test.
 */
final class CircuitTest extends ApacheTestCase
{
    private const WINDOW = 60;

    private const INTERVAL = 5;

    private const MINIMUM = 10;

    private const CHILDREN = 4;

    /**
     * The real Ganesha, built by each request over SlidingTimeWindowShm: failure rate
     * threshold 50 %, minimumRequests 10, time window 60 s, intervalToHalfOpen 5 s.
     */
    public function testGaneshaTripsOnceForEveryChildAndRecovers(): void
    {
        self::requireGanesha();
        $server = $this->startApache(startServers: self::CHILDREN);
        $circuit = ['service' => Unique::name('circuit.'), 'window' => self::WINDOW, 'threshold' => 50, 'minimum' => self::MINIMUM, 'interval' => self::INTERVAL];
        $failedAt = \time();
        $at = static fn (int $now): array => ['now' => $now] + $circuit;

        // 9 failures: twice one from each child at once, then one more
        $failures = [
            ...self::everyChild($server, self::ganesha(), ['op' => 'failure'] + $at($failedAt), self::CHILDREN),
            ...self::everyChild($server, self::ganesha(), ['op' => 'failure'] + $at($failedAt), self::CHILDREN),
        ];
        $failures[] = $server->json(self::ganesha(), ['op' => 'failure'] + $at($failedAt));
        self::assertSame([], \array_merge(...\array_column($failures, 'events')), 'no event before the 10th failure');
        foreach (self::everyChild($server, self::ganesha(), ['op' => 'available'] + $at($failedAt), self::CHILDREN) as $pid => $answer) {
            self::assertTrue($answer['available'], "after 9 failures child {$pid} still lets requests through");
        }

        $failures[] = $last = $server->json(self::ganesha(), ['op' => 'failure'] + $at($failedAt));
        self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $last['events'], 'the 10th failure, counted across the children, trips the circuit');
        self::assertGreaterThanOrEqual(self::CHILDREN, \count(\array_unique(\array_column($failures, 'pid'))), 'failures from every child');
        foreach (self::everyChild($server, self::ganesha(), ['op' => 'available'] + $at($failedAt), self::CHILDREN) as $pid => $answer) {
            self::assertFalse($answer['available'], "child {$pid} rejects once the circuit tripped");
            self::assertSame([], $answer['events']);
        }

        // the interval passed: one trial, whichever child asks first
        $later = $failedAt + self::INTERVAL + 1;
        $admitted = [];
        foreach (self::everyChild($server, self::ganesha(), ['op' => 'trial'] + $at($later), self::CHILDREN) as $pid => $answer) {
            if ($answer['available']) {
                $admitted[] = $pid;
                self::assertSame([[Ganesha::EVENT_CALMED_DOWN, $circuit['service'], '']], $answer['events'], 'the trial\'s success calms the circuit down');
            } else {
                self::assertSame([], $answer['events']);
            }
        }
        self::assertCount(1, $admitted, 'one trial for every child');
        $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot'] + $at($later))['snapshot'];
        self::assertSame(
            [self::MINIMUM, 1, self::CHILDREN + self::CHILDREN - 1, Ganesha::STATUS_CALMED_DOWN, $later],
            [$snapshot['failures'], $snapshot['successes'], $snapshot['rejections'], $snapshot['status'], $snapshot['last_failure_time']],
            'failures, successes, rejections, status, and the trial restarted the interval'
        );

        // the failures left the window
        foreach (self::everyChild($server, self::ganesha(), ['op' => 'available'] + $at($failedAt + self::WINDOW + 1), self::CHILDREN) as $pid => $answer) {
            self::assertTrue($answer['available'], "child {$pid} lets requests through again");
            self::assertSame([], $answer['events']);
        }
    }

    /**
     * Without Ganesha, the same story through the native class, on a fixed clock: the failure
     * count and the status are every child's, and of the children that read the last failure
     * time at once after the interval, exactly one is given the trial (the stored time).
     */
    public function testTheNativeCountersStatusAndTrialAreEveryChilds(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN);
        $service = Unique::name('native.');
        $failureKey = "ganesha_{$service}_failure";
        $statusKey = "ganesha_{$service}_status";
        $failedAt = \time();
        $at = ['now' => $failedAt, 'interval' => self::INTERVAL];
        $read = ['op' => 'load', 'keys' => [$failureKey], 'statuses' => [$statusKey]] + $at;

        self::everyChild($server, self::native(), ['op' => 'failure', 'service' => $service] + $at, self::CHILDREN);
        self::everyChild($server, self::native(), ['op' => 'failure', 'service' => $service] + $at, self::CHILDREN);
        $server->json(self::native(), ['op' => 'failure', 'service' => $service] + $at);
        $server->json(self::native(), ['op' => 'failure', 'service' => $service] + $at);
        $server->json(self::native(), ['op' => 'save_status', 'key' => $statusKey, 'status' => 2] + $at);
        foreach (self::everyChild($server, self::native(), $read, self::CHILDREN) as $pid => $answer) {
            self::assertSame([[$failureKey => self::MINIMUM], [$statusKey => 2]], [$answer['counts'], $answer['statuses']], "child {$pid}: 10 failures, tripped");
        }

        $later = $failedAt + self::INTERVAL + 1;
        $claims = \array_column(self::everyChild($server, self::native(), ['op' => 'claim', 'key' => $failureKey, 'now' => $later, 'interval' => self::INTERVAL], self::CHILDREN), 'last_failure_time');
        \sort($claims);
        self::assertSame([$failedAt, $later, $later, $later], $claims, 'one child is given the stored time (the trial), the others the time it claimed');
    }
}
