<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Workers;

use Ackintosh\Ganesha;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * RoadRunner's model, which RoadRunner itself (a Go binary) cannot stand for here: a supervisor
 * that is no PHP parent of its workers (WorkerPool) starts 4 `php` workers, each exec'd on its
 * own and so running its own PHP startup, each booting the real Ganesha once over
 * SlidingTimeWindowShm and serving requests relayed over its pipes.
 *
 * No process forks the workers after the extension's startup, so nothing shares an anonymous
 * segment: with `ganesha_shm.path` every worker maps the one file and the pool has one set of
 * circuits, which outlives a worker killed and replaced; without it each worker counts, trips
 * and forgets alone (docs/scope.md: each process "has circuits of its own").
 *
 * Ganesha's Rate strategy, time window 60 s (every test ends well within it), threshold 50 %,
 * intervalToHalfOpen 600 s (no trial is ever due): what is asserted depends on the counts alone.
 */
final class WorkersTest extends TestCase
{
    private const WORKERS = 4;

    /** Requests of the counting tests, spread round-robin: 500 per worker (26 KB of lines, within a pipe). */
    private const REQUESTS = 2000;

    /** minimumRequests of the tripping tests: more failures than any worker reports alone. */
    private const MINIMUM = 8;

    /** minimumRequests of the counting tests: never reached, so no circuit trips. */
    private const NEVER = 1_000_000;

    private string $dir;

    private ?WorkerPool $pool = null;

    protected function setUp(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->dir = TempDir::create('ganesha-shm-workers-');
    }

    protected function tearDown(): void
    {
        try {
            $this->pool?->stop();
        } finally {
            $this->pool = null;
            if (isset($this->dir)) {
                TempDir::remove($this->dir);
            }
        }
    }

    /**
     * With the path, a mix of successes and failures served concurrently by the 4 workers is
     * counted exactly once each, and every worker reads the pool's totals.
     */
    public function testWithAPathEveryWorkerCountsIntoOneCircuit(): void
    {
        $pool = $this->startPool(shared: true, minimumRequests: self::NEVER);
        $service = Unique::name('rr.counts.');
        $requests = self::mix($service);

        $answers = $pool->dispatch($requests);

        self::assertSame([], \array_merge(...\array_column($answers, 'events')), 'no trip: minimumRequests is never reached');
        self::assertCount(self::WORKERS, \array_unique(\array_column($answers, 'pid')), 'every worker served its share');
        $sent = \array_count_values(\array_column($requests, 'op'));
        foreach ($pool->everyWorker(['op' => 'snapshot', 'service' => $service]) as $worker => $answer) {
            self::assertSame(
                [$sent['failure'], $sent['success'], 0, Ganesha::STATUS_CALMED_DOWN],
                self::figures($answer['snapshot']),
                "worker {$worker} reads the failures, successes, rejections and status of the whole pool"
            );
        }
    }

    /**
     * With the path, failures from every worker, 2 each (below minimumRequests 8 alone), trip
     * the one circuit; every worker then refuses, and so does the worker that replaces one
     * SIGKILLed, which counts on from the pool's totals.
     */
    public function testWithAPathFailuresFromSeveralWorkersTripOneCircuitThatAReplacementSees(): void
    {
        $pool = $this->startPool(shared: true, minimumRequests: self::MINIMUM);
        $service = Unique::name('rr.trip.');

        // 7 failures at once (2, 2, 2 and 1 a worker): below minimumRequests, so no worker races
        // another to trip; the 8th, from worker 3, trips the circuit
        $answers = $pool->dispatch(\array_fill(0, self::MINIMUM - 1, ['op' => 'failure', 'service' => $service]));
        self::assertSame([], \array_merge(...\array_column($answers, 'events')));
        self::assertSame(
            [[Ganesha::EVENT_TRIPPED, $service]],
            $pool->ask(self::WORKERS - 1, ['op' => 'failure', 'service' => $service])['events'],
            'the 8th failure trips the circuit, though its worker reported 2'
        );

        foreach ($pool->everyWorker(['op' => 'available', 'service' => $service]) as $worker => $answer) {
            self::assertFalse($answer['available'], "worker {$worker} refuses");
        }

        $killed = $pool->pid(1);
        $replacement = $pool->killAndReplace(1);
        self::assertNotSame($killed, $replacement);
        self::assertFalse($pool->ask(1, ['op' => 'available', 'service' => $service])['available'], 'the replacement refuses too');
        self::assertSame(
            [self::MINIMUM, 0, self::WORKERS + 1, Ganesha::STATUS_TRIPPED],
            self::figures($pool->ask(1, ['op' => 'snapshot', 'service' => $service])['snapshot']),
            'the replacement reads every failure, every refusal (its own included) and the status'
        );
    }

    /**
     * Without the path, each worker made an anonymous segment at its own startup: it counts
     * its own share of the requests and nothing of the others'.
     */
    public function testWithoutAPathEachWorkerCountsOnlyItsOwnRequests(): void
    {
        $pool = $this->startPool(shared: false, minimumRequests: self::NEVER);
        $service = Unique::name('rr.counts.');
        $requests = self::mix($service);

        $answers = $pool->dispatch($requests);

        $own = [];
        foreach ($answers as $i => $answer) {
            $own[$answer['pid']][$requests[$i]['op']] = ($own[$answer['pid']][$requests[$i]['op']] ?? 0) + 1;
        }
        self::assertCount(self::WORKERS, $own, 'every worker served its share');
        foreach ($pool->everyWorker(['op' => 'snapshot', 'service' => $service]) as $worker => $answer) {
            self::assertSame(
                [$own[$answer['pid']]['failure'], $own[$answer['pid']]['success'], 0, Ganesha::STATUS_CALMED_DOWN],
                self::figures($answer['snapshot']),
                "worker {$worker} counts only the requests it served"
            );
        }
    }

    /**
     * Without the path, the failures that tripped the pool's circuit above, 2 from each worker,
     * trip nothing; a worker trips only on failures it saw itself, the others still let requests
     * through, and its replacement starts from nothing.
     */
    public function testWithoutAPathFailuresTripOnlyTheWorkerThatSawThem(): void
    {
        $pool = $this->startPool(shared: false, minimumRequests: self::MINIMUM);
        $service = Unique::name('rr.trip.');

        $answers = $pool->dispatch(\array_fill(0, self::MINIMUM, ['op' => 'failure', 'service' => $service]));
        self::assertSame([], \array_merge(...\array_column($answers, 'events')), '8 failures spread over 4 workers trip no circuit');
        foreach ($pool->everyWorker(['op' => 'available', 'service' => $service]) as $worker => $answer) {
            self::assertTrue($answer['available'], "worker {$worker} lets requests through");
        }

        // worker 0 alone reaches 8 failures
        $events = [];
        for ($i = 2; $i < self::MINIMUM; ++$i) {
            $events = [...$events, ...$pool->ask(0, ['op' => 'failure', 'service' => $service])['events']];
        }
        self::assertSame([[Ganesha::EVENT_TRIPPED, $service]], $events, 'worker 0 trips on its own 8 failures');
        self::assertSame(
            [false, true, true, true],
            \array_column($pool->everyWorker(['op' => 'available', 'service' => $service]), 'available'),
            'only worker 0 refuses'
        );
        foreach ([0 => self::MINIMUM, 1 => 2, 2 => 2, 3 => 2] as $worker => $failures) {
            self::assertSame($failures, $pool->ask($worker, ['op' => 'snapshot', 'service' => $service])['snapshot']['failures'], "worker {$worker}'s failures");
        }

        $pool->killAndReplace(0);
        self::assertNull($pool->ask(0, ['op' => 'snapshot', 'service' => $service])['snapshot'], 'the replacement of worker 0 starts from nothing');
        self::assertTrue($pool->ask(0, ['op' => 'available', 'service' => $service])['available']);
    }

    private function startPool(bool $shared, int $minimumRequests): WorkerPool
    {
        $segment = $shared ? $this->dir . '/circuits' : null;
        $this->pool = new WorkerPool(
            self::WORKERS,
            ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => $minimumRequests, 'intervalToHalfOpen' => 600],
            $segment,
            $this->dir . '/workers.stderr'
        );
        $pids = [];
        for ($worker = 0; $worker < self::WORKERS; ++$worker) {
            self::assertSame($segment ?? 'anonymous', $this->pool->segment($worker), "worker {$worker}'s segment");
            $pids[] = $this->pool->pid($worker);
        }
        self::assertCount(self::WORKERS, \array_unique($pids));

        return $this->pool;
    }

    /**
     * REQUESTS requests for $service, 2 failures in every 5 and successes otherwise, so that
     * each worker is given both.
     *
     * @return list<array{op: string, service: string}>
     */
    private static function mix(string $service): array
    {
        $requests = [];
        for ($i = 0; $i < self::REQUESTS; ++$i) {
            $requests[] = ['op' => $i % 5 < 2 ? 'failure' : 'success', 'service' => $service];
        }

        return $requests;
    }

    /**
     * @param array{failures: int, successes: int, rejections: int, status: int}|null $snapshot
     * @return array{int, int, int, int}|null failures, successes, rejections, status
     */
    private static function figures(?array $snapshot): ?array
    {
        return $snapshot === null ? null : [$snapshot['failures'], $snapshot['successes'], $snapshot['rejections'], $snapshot['status']];
    }
}
