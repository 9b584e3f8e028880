<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Workers come and go; the segment stays with the master. A worker SIGKILLed in the middle of
 * its increments, one ended by request_terminate_timeout, and workers recycled by
 * pm.max_requests are replaced by new processes that see every count the old ones completed,
 * and keep counting.
 */
final class WorkerLifecycleTest extends FpmTestCase
{
    private const WORKERS = 4;

    private const SIGKILL = 9;

    /** Seconds to wait for the looping request to get going, and for the master to replace the worker. */
    private const WAIT_S = 10.0;

    public function testAWorkerKilledWhileIncrementingIsReplacedAndNothingIsLost(): void
    {
        $server = $this->startFpm(maxChildren: self::WORKERS);

        [$victim, $completed, $new, $read] = $this->interruptLoopingRequest($server, static function (int $victim): void {
            self::assertTrue(\posix_kill($victim, self::SIGKILL));
        });

        self::assertStringContainsString("child {$victim} exited on signal 9 (SIGKILL)", $server->fpmLog());
        self::report(\sprintf('worker %d SIGKILLed after %d increments, replaced by %d, which read %d', $victim, $completed, $new, $read));
    }

    /** php-fpm's own way of killing a worker: a request running past request_terminate_timeout. */
    public function testAWorkerEndedByRequestTerminateTimeoutIsReplacedAndNothingIsLost(): void
    {
        $server = $this->startFpm(maxChildren: self::WORKERS, pool: ['request_terminate_timeout' => '1s']);

        [$victim, $completed, $new, $read] = $this->interruptLoopingRequest($server, null);

        self::assertMatchesRegularExpression("/child {$victim}, script .* execution timed out/", $server->fpmLog());
        self::report(\sprintf('worker %d ended by request_terminate_timeout=1s after %d increments, replaced by %d, which read %d', $victim, $completed, $new, $read));
    }

    /**
     * Starts a request that increments one key in a loop, 2 ms apart; once it has done 50,
     * $interrupt (or php-fpm itself, when null) ends its worker. Then: the master replaces the
     * worker, the killed request got no answer, every worker (the new one included) reads the
     * increments the killed one completed (and maybe the one it was killed after) and the 40 of
     * another key done before, and 40 more increments all land.
     *
     * @param (callable(int): void)|null $interrupt given the pid of the worker running the loop
     * @return array{int, int, int, int} the worker ended, the increments it completed, its
     *     replacement, and the count the replacement read
     */
    private function interruptLoopingRequest(FpmServer $server, ?callable $interrupt): array
    {
        $before = $server->workerPids();
        $done = Unique::name('killed_done_');
        $looped = Unique::name('killed_loop_');
        $progress = $server->dir . '/progress';

        $total = self::total($server->clients(self::WORKERS, self::native(), ['op' => 'increment', 'key' => $done], 10));
        self::assertSame([40, 0], [$total['ok'], $total['failed']]);

        // a request that increments in a loop, 2 ms apart, writing how far it got after each
        $loop = \proc_open(
            [\PHP_BINARY, '-n', '-r', \sprintf(
                'require %s; $a = %s::get(%d, %s, %s); echo $a["status"];',
                \var_export(__DIR__ . '/FastCgiClient.php', true),
                '\\' . FastCgiClient::class,
                $server->port,
                \var_export(self::native(), true),
                \var_export(['op' => 'loop', 'key' => $looped, 'n' => 100_000, 'sleep_us' => 2_000, 'progress' => $progress], true)
            )],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes
        );
        self::assertIsResource($loop);
        try {
            [$victim] = $this->waitForProgress($progress, 50);
            self::assertContains($victim, $before, 'the loop runs in one of the workers');

            if ($interrupt !== null) {
                $interrupt($victim);
            }
            $after = $this->waitForReplacement($server, $victim);
        } finally {
            // the client ends when its connection does, at once after the kill; else (the test
            // failed before it) it is ended here rather than waiting for the loop's own deadline
            $deadline = \microtime(true) + 5.0;
            while (\proc_get_status($loop)['running'] && \microtime(true) < $deadline) {
                \usleep(10_000);
            }
            if (\proc_get_status($loop)['running']) {
                \proc_terminate($loop, self::SIGKILL);
            }
            $answer = (string) \stream_get_contents($pipes[1]);
            \fclose($pipes[1]);
            \proc_close($loop);
        }
        self::assertNotSame('200', $answer, 'the killed request got no answer');
        [$pid, $completed] = $this->progress($progress);
        self::assertSame($victim, $pid);

        $new = \array_values(\array_diff($after, $before));
        self::assertCount(1, $new, 'one new worker: ' . \implode(' ', $after));
        $seen = self::everyWorker($server, self::native(), ['op' => 'load', 'keys' => [$done, $looped]]);
        self::assertSame($after, \array_keys($seen));
        $looping = $seen[$new[0]]['counts'][$looped];
        self::assertContains($looping, [$completed, $completed + 1], "the {$completed} increments the killed worker completed (and maybe the one it was killed after)");
        foreach ($seen as $pid => $answer) {
            self::assertSame([$done => 40, $looped => $looping], $answer['counts'], "worker {$pid}" . ($pid === $new[0] ? ' (the new one)' : ''));
        }

        $total = self::total($server->clients(self::WORKERS, self::native(), ['op' => 'increment', 'key' => $looped], 10));
        self::assertSame([40, 0], [$total['ok'], $total['failed']]);
        self::assertSame([$looped => $looping + 40], $server->json(self::native(), ['op' => 'load', 'keys' => [$looped]])['counts']);

        return [$victim, $completed, $new[0], $looping];
    }

    public function testWorkersRecycledByMaxRequestsKeepTheCounts(): void
    {
        $maxRequests = 5;
        $requests = 60;
        $server = $this->startFpm(maxChildren: self::WORKERS, pool: ['pm.max_requests' => $maxRequests]);
        $before = $server->workerPids();
        $key = Unique::name('recycled_');

        $total = self::total($server->clients(self::WORKERS, self::native(), ['op' => 'increment', 'key' => $key], $requests / self::WORKERS));

        self::assertSame([$requests, 0], [$total['ok'], $total['failed']]);
        self::assertLessThanOrEqual($maxRequests, \max($total['pids']), 'no worker serves more than pm.max_requests requests: ' . self::describePids($total['pids']));
        self::assertGreaterThanOrEqual(\intdiv($requests, $maxRequests), \count($total['pids']), 'so at least 60 / 5 workers served them');
        $seen = self::everyWorker($server, self::native(), ['op' => 'load', 'keys' => [$key]]);
        // the 4 workers of the start could serve 20 of the 60 requests at most: some were
        // replaced, and so are some of the workers now
        self::assertNotSame([], \array_diff(\array_keys($seen), $before), 'workers of the start were recycled');
        foreach ($seen as $pid => $answer) {
            self::assertSame([$key => $requests], $answer['counts'], "worker {$pid}");
        }
        self::report(\sprintf('pm.max_requests=%d: %d increments served by %d workers (%s)', $maxRequests, $requests, \count($total['pids']), self::describePids($total['pids'])));
    }

    /**
     * Waits until the looping request completed $increments increments.
     *
     * @return array{int, int} the pid of the worker running it, and the increments it completed
     */
    private function waitForProgress(string $file, int $increments): array
    {
        $deadline = \microtime(true) + self::WAIT_S;
        while (($progress = $this->progress($file)) === null || $progress[1] < $increments) {
            if (\microtime(true) > $deadline) {
                self::fail(\sprintf('the looping request did not complete %d increments in %.0f s', $increments, self::WAIT_S));
            }
            \usleep(5_000);
        }

        return $progress;
    }

    /** @return array{int, int}|null [pid, increments completed], from the progress file */
    private function progress(string $file): ?array
    {
        $contents = @\file_get_contents($file);
        if (!\is_string($contents) || \preg_match('/^(\d+) (\d+)$/', $contents, $m) !== 1) {
            return null;
        }

        return [(int) $m[1], (int) $m[2]];
    }

    /**
     * Waits until the master replaced the killed worker.
     *
     * @return list<int> the workers then
     */
    private function waitForReplacement(FpmServer $server, int $killed): array
    {
        $deadline = \microtime(true) + self::WAIT_S;
        while (\in_array($killed, $workers = $server->workerPids(), true) || \count($workers) !== self::WORKERS) {
            if (\microtime(true) > $deadline) {
                self::fail(\sprintf("the master did not replace worker %d in %.0f s\n%s", $killed, self::WAIT_S, $server->errorLog()));
            }
            \usleep(10_000);
        }

        return $workers;
    }
}
