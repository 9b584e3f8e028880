<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Swoole;

use Ackintosh\Ganesha;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The adapter under Swoole: a Swoole\Http\Server in SWOOLE_PROCESS mode (SwooleServer), whose
 * master runs PHP's startup, so the extension creates the segment there, before Swoole's
 * manager forks the workers. Every worker, each serving many requests at once as coroutines,
 * then counts into the same circuits, through the real Ganesha: exact counts, one trip and
 * one half-open trial for every worker, with Swoole's runtime hooks on and off, and a worker
 * the manager forks in place of a killed one sees the same state.
 *
 * Skipped when Swoole is not built (bash tests/swoole.sh GIT_DIR) or Ganesha is not loadable.
 * The requests that read a circuit give Ganesha and the adapter a fixed time (the tests'
 * VirtualClock, through the query): the workers and coroutines race for real; only the time
 * they read is set by the test, so a slow machine cannot make a trial due twice.
 *
 * @requires extension posix
 */
#[RequiresPhpExtension('posix')]
final class SwooleTest extends TestCase
{
    private const WORKERS = 4;

    /** Ganesha's settings of a circuit that never trips on the counts of a test. */
    private const NEVER_TRIPS = ['window' => 600, 'minimum' => 1_000_000];

    /** @var list<SwooleServer> */
    private array $servers = [];

    protected function setUp(): void
    {
        $missing = SwooleServer::missing() ?? Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->servers as $server) {
            $server->stop();
        }
        $this->servers = [];
    }

    /** @return array<string, array{bool}> */
    public static function hooks(): array
    {
        return ['runtime hooks on' => [true], 'runtime hooks off' => [false]];
    }

    /**
     * 400 requests sent at once over as many connections, half a failure and half a success
     * through Ganesha, handed to the 4 workers in turn, which serve them in parallel: every one
     * is counted in the one circuit, whichever worker served it, and every worker reads the sum.
     *
     * @dataProvider hooks
     */
    #[DataProvider('hooks')]
    public function testConcurrentRequestsOfEveryWorkerAddUpExactly(bool $hooks): void
    {
        $server = $this->start($hooks);
        $circuit = ['service' => Unique::name('count.')] + self::NEVER_TRIPS;
        $requests = 400;

        $answers = $server->jsonAll('/', \array_map(
            static fn (int $i): array => ['op' => $i % 2 === 0 ? 'failure' : 'success'] + $circuit,
            \range(1, $requests)
        ));

        $byWorker = \array_count_values(\array_column($answers, 'pid'));
        self::assertCount(self::WORKERS, $byWorker, 'every worker served some of the requests');
        self::assertHooks($hooks, $answers);
        foreach (self::everyWorker($server, ['op' => 'snapshot'] + $circuit) as $pid => $answer) {
            self::assertSame(
                [$requests / 2, $requests / 2],
                [$answer['snapshot']['failures'], $answer['snapshot']['successes']],
                "worker {$pid} reads every failure and success"
            );
        }
        self::report(\sprintf('hooks %s: %d requests at once counted exactly, served by workers %s', $hooks ? 'on' : 'off', $requests, self::describe($byWorker)));
    }

    /**
     * One request runs 100 coroutines reporting 10 failures each, one such request in every
     * worker at once: +1000 per request, exactly. With the hooks on, the usleep() between two
     * failures yields, and the coroutines interleave; off, it blocks, and each runs to its end.
     *
     * @dataProvider hooks
     */
    #[DataProvider('hooks')]
    public function testHundredCoroutinesOfTenFailuresEachCountAThousand(bool $hooks): void
    {
        $server = $this->start($hooks);
        $circuit = ['service' => Unique::name('coroutines.')] + self::NEVER_TRIPS;

        $answers = $server->jsonAll('/', \array_fill(0, self::WORKERS, ['op' => 'coroutines', 'coroutines' => 100, 'times' => 10] + $circuit));

        self::assertCount(self::WORKERS, \array_unique(\array_column($answers, 'pid')), 'every worker ran a request of coroutines, at once');
        self::assertHooks($hooks, $answers);
        foreach ($answers as $answer) {
            if ($hooks) {
                self::assertGreaterThan(1, $answer['in_flight'], "worker {$answer['pid']}: the coroutines interleave at the hooked usleep()");
            } else {
                self::assertSame(1, $answer['in_flight'], "worker {$answer['pid']}: unhooked, each coroutine runs to its end");
            }
        }
        $snapshot = $server->json('/', ['op' => 'snapshot'] + $circuit)['snapshot'];
        self::assertSame([self::WORKERS * 1000, 0], [$snapshot['failures'], $snapshot['successes']]);
        self::report(\sprintf(
            'hooks %s: %d requests of 100 coroutines x 10 failures counted %d; coroutines under way at once, by worker: %s',
            $hooks ? 'on' : 'off',
            self::WORKERS,
            $snapshot['failures'],
            self::describe(\array_column($answers, 'in_flight', 'pid'))
        ));
    }

    /**
     * Ganesha's circuit tripped by failures several workers reported, none of them enough
     * alone (minimumRequests 8): 7 failures at once leave it closed for every worker; the 8th
     * trips it, and every worker then refuses.
     */
    public function testFailuresOfSeveralWorkersTripTheCircuitForEveryWorker(): void
    {
        $server = $this->start();
        $at = ['service' => Unique::name('trip.'), 'window' => 60, 'threshold' => 50, 'minimum' => 8, 'interval' => 5, 'now' => \time()];

        $failures = $server->jsonAll('/', \array_fill(0, 7, ['op' => 'failure'] + $at));
        self::assertSame([], \array_merge(...\array_column($failures, 'events')), 'no event before the 8th failure');
        self::assertCount(self::WORKERS, \array_unique(\array_column($failures, 'pid')), 'the failures came from every worker, 2 at most each');
        foreach (self::everyWorker($server, ['op' => 'available'] + $at) as $pid => $answer) {
            self::assertTrue($answer['available'], "after 7 failures worker {$pid} still lets requests through");
        }

        $last = $server->json('/', ['op' => 'failure'] + $at);
        self::assertSame([[Ganesha::EVENT_TRIPPED, $at['service'], '']], $last['events'], 'the 8th failure, counted across the workers, trips the circuit');
        foreach (self::everyWorker($server, ['op' => 'available'] + $at) as $pid => $answer) {
            self::assertFalse($answer['available'], "worker {$pid} refuses once the circuit tripped");
        }
    }

    /**
     * One half-open trial among 64 coroutines of the 4 workers: a circuit tripped, then 6 s
     * later (intervalToHalfOpen 5 s) 64 requests, held at a barrier until all are in flight,
     * ask isAvailable() at once: one is let through, every round; the trial restarted the
     * interval, the others were rejected, and no second trial follows.
     */
    public function testOneHalfOpenTrialAmongCoroutinesOfEveryWorker(): void
    {
        $server = $this->start();
        $parties = 64;
        $interval = 5;
        $tripAt = \time();
        $later = $tripAt + $interval + 1;

        for ($round = 0; $round < 5; ++$round) {
            $circuit = ['service' => Unique::name('race.'), 'window' => 60, 'minimum' => 2, 'interval' => $interval];
            $server->json('/', ['op' => 'failure', 'now' => $tripAt] + $circuit);
            $tripped = $server->json('/', ['op' => 'failure', 'now' => $tripAt] + $circuit);
            self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events'], "round {$round}: tripped");
            self::assertFalse($server->json('/', ['op' => 'available', 'now' => $tripAt] + $circuit)['available'], "round {$round}: open");

            $answers = $server->jsonAll('/', \array_fill(0, $parties, ['op' => 'available', 'now' => $later] + $circuit + $server->barrier($parties)));

            $byWorker = \array_count_values(\array_column($answers, 'pid'));
            self::assertCount(self::WORKERS, $byWorker, "round {$round}: coroutines of every worker asked");
            self::assertGreaterThan(1, \max($byWorker), "round {$round}: several coroutines in a worker asked");
            $admitted = \array_filter($answers, static fn (array $answer): bool => $answer['available']);
            self::assertCount(1, $admitted, "round {$round}: one of {$parties} coroutines let through");
            self::assertSame([], \array_merge(...\array_column($answers, 'events')), "round {$round}: no event");
            $snapshot = $server->json('/', ['op' => 'snapshot', 'now' => $later] + $circuit)['snapshot'];
            self::assertSame(
                [$later, 1 + $parties - 1],
                [$snapshot['last_failure_time'], $snapshot['rejections']],
                "round {$round}: the trial restarted the interval; the other coroutines were rejected"
            );
            self::assertFalse($server->json('/', ['op' => 'available', 'now' => $later] + $circuit)['available'], "round {$round}: no second trial");
            self::report(\sprintf('half-open round %d: 1 of %d coroutines let through (worker %d); coroutines by worker: %s', $round, $parties, \reset($admitted)['pid'], self::describe($byWorker)));
        }
    }

    /**
     * A worker killed with SIGKILL, after the workers counted failures and tripped a circuit:
     * the worker Swoole's manager forks in its place maps the same segment, reads the same
     * count and refuses, and what it counts the others read.
     */
    public function testAWorkerForkedInPlaceOfAKilledOneSeesTheSameState(): void
    {
        $server = $this->start();
        $at = ['service' => Unique::name('killed.'), 'window' => 60, 'threshold' => 50, 'minimum' => 8, 'interval' => 600, 'now' => \time()];
        $failures = [];
        for ($i = 0; $i < 8; ++$i) {
            $failures[] = $server->json('/', ['op' => 'failure'] + $at);
        }
        self::assertSame([[Ganesha::EVENT_TRIPPED, $at['service'], '']], \end($failures)['events']);
        $victim = $failures[0]['pid'];

        $new = $server->killWorker($victim);
        self::assertSame(1, ProcFs::segmentMappings($new), "the new worker {$new} maps the segment, inherited from the manager");

        $answers = self::everyWorker($server, ['op' => 'snapshot'] + $at);
        self::assertArrayNotHasKey($victim, $answers);
        self::assertSame([8, Ganesha::STATUS_TRIPPED], [$answers[$new]['snapshot']['failures'], $answers[$new]['snapshot']['status']], "the new worker {$new} reads the count and the status");
        self::assertSame($server->managerPid(), $answers[$new]['manager']);
        foreach (self::everyWorker($server, ['op' => 'available'] + $at) as $pid => $answer) {
            self::assertFalse($answer['available'], "worker {$pid} refuses");
        }
        // failures of the new worker, read by the others
        self::assertArrayHasKey($new, self::everyWorker($server, ['op' => 'failure'] + $at, $sent));
        foreach (self::everyWorker($server, ['op' => 'snapshot'] + $at) as $pid => $answer) {
            self::assertSame(8 + $sent, $answer['snapshot']['failures'], "worker {$pid} reads every failure");
        }
        self::report("worker {$victim} killed (SIGKILL), replaced by {$new}, which read 8 failures and the open circuit");
    }

    private function start(bool $hooks = true): SwooleServer
    {
        return $this->servers[] = SwooleServer::start($hooks, self::WORKERS);
    }

    /** @param array<int, int> $byPid */
    private static function describe(array $byPid): string
    {
        \ksort($byPid);

        return \implode(' ', \array_map(static fn (int $pid, int $n): string => "{$pid}:{$n}", \array_keys($byPid), $byPid));
    }

    /** A line of figures on STDERR (PHPUnit checks the tests print nothing on STDOUT). */
    private static function report(string $line): void
    {
        \fwrite(\STDERR, 'swoole: ' . $line . \PHP_EOL);
    }

    /**
     * The workers that served $answers run with Swoole's runtime hooks on (some flags of
     * Swoole\Runtime::getHookFlags() set: those of SWOOLE_HOOK_ALL that this build has) or off.
     *
     * @param list<array<string, mixed>> $answers
     */
    private static function assertHooks(bool $hooks, array $answers): void
    {
        foreach ($answers as $answer) {
            if ($hooks) {
                self::assertNotSame(0, $answer['hooks'], "worker {$answer['pid']} runs with the hooks on");
            } else {
                self::assertSame(0, $answer['hooks'], "worker {$answer['pid']} runs with the hooks off");
            }
        }
    }

    /**
     * Sends the request, one after the other, until every worker of the server answered it
     * (the workers are handed requests in turn, so WORKERS requests do, save a worker just
     * replaced); returns the answers keyed by worker pid, sorted, and says in $sent how many
     * requests it sent.
     *
     * @param array<string, scalar> $query
     * @return array<int, array<string, mixed>>
     */
    private static function everyWorker(SwooleServer $server, array $query, ?int &$sent = null): array
    {
        $workers = $server->workerPids();
        $answers = [];
        for ($sent = 0; \array_diff($workers, \array_keys($answers)) !== []; ++$sent) {
            if ($sent === 4 * self::WORKERS) {
                self::fail(\sprintf('%d requests were not handed to every worker (%s): only %s', $sent, \implode(' ', $workers), \implode(' ', \array_keys($answers))));
            }
            $answer = $server->json('/', $query);
            $answers[$answer['pid']] = $answer;
        }
        \ksort($answers);

        return $answers;
    }
}
