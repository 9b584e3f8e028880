<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * No lock lives in the store: a process SIGKILLed at any instruction, a slot claim included,
 * leaves the store usable and every other key intact.
 *
 * Each round forks WRITERS children that all write at once: a key they share, a key of their
 * own, a brand-new key every third iteration (most of their time goes into creating keys, so
 * that some kills land inside a slot claim), last failure times and statuses. The parent
 * SIGKILLs VICTIMS of them, each once it has done a random number of iterations (read from the
 * store itself), and the others run ITERATIONS iterations and exit. Then: no write of a survivor is lost, a
 * killed writer's keys hold exactly what it did before it died (give or take the write it died
 * in), the keys the parent wrote are intact, and new writes complete, within a deadline.
 *
 * Run with GANESHA_SHM_CRASH_STATS=1 for figures on STDERR: where the kills landed, and how
 * many claims the killed writers left behind.
 *
 * @requires extension pcntl
 * @requires extension posix
 */
#[RequiresPhpExtension('pcntl')]
#[RequiresPhpExtension('posix')]
final class CrashTest extends TestCase
{
    private const ROUNDS = 40;

    /**
     * Rounds at the most: on a busy machine fewer kills land while the victim writes, and the
     * test runs more rounds until enough have (the store has room for them).
     */
    private const MAX_ROUNDS = 80;

    /** Kills that must land while the victim writes: an eighth of the first rounds' victims. */
    private const IN_LOOP_KILLS = self::ROUNDS * self::VICTIMS / 8;

    private const WRITERS = 6;

    private const VICTIMS = 3;

    /** Iterations of a writer that is not killed. */
    private const ITERATIONS = 600;

    /** Iteration i increments the new counter key n{i} when i % NEW_KEY_EVERY === 0. */
    private const NEW_KEY_EVERY = 3;

    /** Iteration i saves the writer's last failure time and status when i % SAVE_EVERY === SAVE_AT. */
    private const SAVE_EVERY = 7;

    private const SAVE_AT = 3;

    /** Iteration i saves the new status key s{i}, then the shared status, when i % STATUS_EVERY === STATUS_AT. */
    private const STATUS_EVERY = 20;

    private const STATUS_AT = 10;

    /** Last failure times the writers save: LAST_FAILURE_BASE + the iteration. */
    private const LAST_FAILURE_BASE = 1_000_000;

    /** Seconds the writers of a round may take, kills included. */
    private const ROUND_DEADLINE_S = 10.0;

    /** Seconds new writes after a round may take. */
    private const CHECK_DEADLINE_S = 5.0;

    /** @var array<int, true> forked children not reaped yet */
    private array $children = [];

    private TestAdapter $main;

    /** For the new keys, which are deleted after each round so that the store does not fill. */
    private TestAdapter $new;

    private string $prefix;

    private string $newPrefix;

    protected function setUp(): void
    {
        $this->prefix = Unique::name('crash_') . '_';
        $this->newPrefix = Unique::name('crashnew_') . '_';
        $this->main = TestAdapter::forWindow(60, null, new FakeStorageKeys($this->prefix));
        $this->new = TestAdapter::forWindow(60, null, new FakeStorageKeys($this->newPrefix));
    }

    protected function tearDown(): void
    {
        foreach (\array_keys($this->children) as $pid) {
            \posix_kill($pid, \SIGKILL);
            \pcntl_waitpid($pid, $status);
        }
        $this->children = [];
        $this->main->reset();
        $this->new->reset();
    }

    public function testWritersKilledAtAnyInstructionLeaveTheStoreUsableAndOtherKeysIntact(): void
    {
        $seed = \random_int(0, \PHP_INT_MAX);
        \mt_srand($seed);
        $main = $this->main;
        $sentinel = $this->prefix . 'sentinel';
        for ($i = 0; $i < 5; ++$i) {
            $main->increment($sentinel . '_failure');
        }
        $main->saveLastFailureTime($sentinel . '_failure', 4242);
        $main->saveStatus($sentinel . '_status', 2);
        /** @var array<string, int> $counts keys written before the current round, and their counts */
        $counts = [$sentinel . '_failure' => 5];
        /** @var array<string, int|null> $lastFailureTimes */
        $lastFailureTimes = [$sentinel . '_failure' => 4242];
        /** @var array<string, int|null> $statuses */
        $statuses = [$sentinel . '_status' => 2];
        $fullErrors = \ganesha_shm_info()['full_errors'];
        $stats = ['kills' => 0, 'in_loop' => 0, 'after_loop' => 0, 'too_late' => 0, 'abandoned_claims' => 0];

        for ($round = 0; $round < self::ROUNDS || ($stats['in_loop'] < self::IN_LOOP_KILLS && $round < self::MAX_ROUNDS); ++$round) {
            $at = "seed {$seed}, round {$round}";
            $keys = $this->roundKeys($round);
            // created here, so that no two processes race to create a key in the round: every
            // claim the round makes is then either published or left behind by a killed writer
            $main->saveLastFailureTime($keys['shared'], 7);
            $main->saveStatus($keys['shared_status'], 0);
            $before = \ganesha_shm_info();

            $exits = $this->runRound($round, $keys);

            $after = \ganesha_shm_info();
            $stats['abandoned_claims'] += ($after['claims'] - $before['claims'])
                - ($after['counter_slots_used'] - $before['counter_slots_used'])
                - ($after['status_slots_used'] - $before['status_slots_used']);

            $sharedMin = 0;
            $sharedMax = 0;
            for ($writer = 0; $writer < self::WRITERS; ++$writer) {
                $exit = $exits[$writer];
                $done = $main->load($keys['private'][$writer]);
                $what = "{$at}, writer {$writer} ({$exit['how']} {$exit['code']}, {$done} iterations done)";
                if ($exit['how'] === 'signal') {
                    self::assertSame(\SIGKILL, $exit['code'], "{$what}: killed by SIGKILL");
                    self::assertTrue($exit['victim'], "{$what}: only victims are killed");
                    self::assertLessThanOrEqual(self::ITERATIONS, $done, $what);
                    ++$stats['kills'];
                    ++$stats[$done < self::ITERATIONS ? 'in_loop' : 'after_loop'];
                } else {
                    self::assertSame(['exit', 0], [$exit['how'], $exit['code']], "{$what}: exit status");
                    self::assertSame(self::ITERATIONS, $done, "{$what}: a writer that was not killed lost no increment");
                    if ($exit['victim']) {
                        ++$stats['too_late'];
                    }
                }
                $killed = $exit['how'] === 'signal';
                $this->assertWriterKeys($round, $writer, $done, $killed, $what);
                $sharedMin += $done;
                $sharedMax += $killed && $done < self::ITERATIONS ? $done + 1 : $done;
                $counts[$keys['private'][$writer]] = $done;
                $lastFailureTimes[$keys['private'][$writer]] = $main->loadLastFailureTime($keys['private'][$writer]);
                $statuses[$keys['private_status'][$writer]] = $main->loadStatus($keys['private_status'][$writer]);
            }
            $shared = $main->load($keys['shared']);
            self::assertGreaterThanOrEqual($sharedMin, $shared, "{$at}: the shared key lost no increment");
            self::assertLessThanOrEqual($sharedMax, $shared, "{$at}: the shared key counted no increment twice");
            self::assertSame(7, $main->loadLastFailureTime($keys['shared']), "{$at}: nobody wrote the shared key's last failure time");
            self::assertContains($main->loadStatus($keys['shared_status']), \range(10, 10 + self::WRITERS - 1), "{$at}: shared status");
            $lastFailureTimes[$keys['shared']] = 7;
            $statuses[$keys['shared_status']] = $main->loadStatus($keys['shared_status']);
            $this->assertIntact($counts, $lastFailureTimes, $statuses, "{$at}, before the new writes");

            $check = $this->checkNewWrites($round, $shared, $at);
            $counts[$keys['shared']] = $shared + 1;
            $counts[$keys['fresh']] = 1;
            $lastFailureTimes[$keys['fresh']] = 99;
            $statuses[$keys['fresh_status']] = 3;
            $this->assertIntact($counts, $lastFailureTimes, $statuses, "{$at}, after the new writes");
            self::assertSame(1, $this->new->load($check['fresh_new']), "{$at}: the new key of the new writes");

            // the new keys go, so that later rounds find room, and a delete works too
            $this->new->reset();
            self::assertSame(0, $this->new->load($this->newKey($round, 0, 0)), "{$at}: reset");
            self::assertSame($fullErrors, \ganesha_shm_info()['full_errors'], "{$at}: the store never filled");
        }

        if (\getenv('GANESHA_SHM_CRASH_STATS')) {
            \fwrite(\STDERR, \sprintf(
                "\nCrashTest: seed %d, %d rounds, %d victims: %d killed while writing, %d killed after their last write, %d exited before their kill; %d claims left behind\n",
                $seed,
                $round,
                $round * self::VICTIMS,
                $stats['in_loop'],
                $stats['after_loop'],
                $stats['too_late'],
                $stats['abandoned_claims']
            ));
        }
        // nine in ten land there on an idle machine, fewer on a busy one; an eighth of the first
        // rounds' at least, or the test did not test much
        self::assertGreaterThanOrEqual(
            self::IN_LOOP_KILLS,
            $stats['in_loop'],
            "seed {$seed}: kills that landed while the victim was writing: " . \json_encode($stats)
        );
    }

    /**
     * The keys of a round: counter keys end in _failure, status keys in _status.
     *
     * @return array{shared: string, shared_status: string, fresh: string, fresh_status: string, private: list<string>, private_status: list<string>}
     */
    private function roundKeys(int $round): array
    {
        $stem = "{$this->prefix}r{$round}";
        $keys = [
            'shared' => "{$stem}shared_failure",
            'shared_status' => "{$stem}shared_status",
            'fresh' => "{$stem}fresh_failure",
            'fresh_status' => "{$stem}fresh_status",
            'private' => [],
            'private_status' => [],
        ];
        for ($writer = 0; $writer < self::WRITERS; ++$writer) {
            $keys['private'][] = "{$stem}w{$writer}_failure";
            $keys['private_status'][] = "{$stem}w{$writer}_status";
        }

        return $keys;
    }

    private function newKey(int $round, int $writer, int $iteration): string
    {
        return "{$this->newPrefix}r{$round}w{$writer}n{$iteration}_failure";
    }

    private function newStatusKey(int $round, int $writer, int $iteration): string
    {
        return "{$this->newPrefix}r{$round}w{$writer}s{$iteration}_status";
    }

    /**
     * Forks the writers, releases them at once, kills the victims, and reaps them all.
     *
     * @param array{shared: string, shared_status: string, private: list<string>, private_status: list<string>} $keys
     * @return list<array{how: string, code: int, victim: bool}>
     */
    private function runRound(int $round, array $keys): array
    {
        $main = $this->main;
        $new = $this->new;
        $barrier = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        if ($barrier === false) {
            throw new \RuntimeException('stream_socket_pair() failed');
        }
        [$wait, $release] = $barrier;

        $pids = [];
        for ($writer = 0; $writer < self::WRITERS; ++$writer) {
            $pids[$writer] = $this->fork(function () use ($wait, $release, $round, $writer, $keys, $main, $new): int {
                \fclose($release);
                // below the parent, which then watches them closely enough to kill them mid-way
                \pcntl_setpriority(19);
                \fread($wait, 1);
                $shared = $keys['shared'];
                $private = $keys['private'][$writer];
                $privateStatus = $keys['private_status'][$writer];
                for ($i = 0; $i < self::ITERATIONS; ++$i) {
                    if ($i % self::NEW_KEY_EVERY === 0) {
                        $new->increment($this->newKey($round, $writer, $i));
                    }
                    $main->increment($shared);
                    $main->increment($private);
                    if ($i % self::SAVE_EVERY === self::SAVE_AT) {
                        $main->saveLastFailureTime($private, self::LAST_FAILURE_BASE + $i);
                        $main->saveStatus($privateStatus, $i);
                    }
                    if ($i % self::STATUS_EVERY === self::STATUS_AT) {
                        $new->saveStatus($this->newStatusKey($round, $writer, $i), $i);
                        $main->saveStatus($keys['shared_status'], 10 + $writer);
                    }
                }

                return 0;
            });
        }
        \fclose($release);
        \fclose($wait);

        // each victim is killed once it has done a random number of iterations (0 included:
        // maybe before it started), as the store itself tells: the parent polls without
        // sleeping, above the writers' priority, so that most kills land while the victim writes
        // (a random sleep would mostly land after the writers' millisecond or two of work)
        $victims = \range(0, self::WRITERS - 1);
        \shuffle($victims);
        $victims = \array_slice($victims, 0, self::VICTIMS);
        $targets = [];
        foreach ($victims as $victim) {
            $targets[$victim] = \mt_rand(0, self::ITERATIONS - 1);
        }
        $exits = [];
        $deadline = \microtime(true) + self::ROUND_DEADLINE_S;
        while ($targets !== []) {
            foreach ($targets as $victim => $target) {
                if ($main->load($keys['private'][$victim]) >= $target) {
                    \posix_kill($pids[$victim], \SIGKILL);
                    unset($targets[$victim]);
                } elseif (($exit = $this->reap($pids[$victim])) !== null) {
                    $exits[$victim] = $exit; // it exited or died by itself
                    unset($targets[$victim]);
                }
            }
            if (\microtime(true) > $deadline) {
                self::fail("round {$round}: victims did not reach their iterations in time: " . \json_encode($targets));
            }
        }
        do {
            foreach ($pids as $writer => $pid) {
                if (!isset($exits[$writer]) && ($exit = $this->reap($pid)) !== null) {
                    $exits[$writer] = $exit;
                }
            }
            if (\count($exits) === self::WRITERS) {
                break;
            }
            if (\microtime(true) > $deadline) {
                self::fail("round {$round}: writers did not finish in time: " . \json_encode(\array_diff_key($pids, $exits)));
            }
            \usleep(1_000);
        } while (true);
        \ksort($exits);
        $result = [];
        foreach ($exits as $writer => $exit) {
            $result[] = $exit + ['victim' => \in_array($writer, $victims, true)];
        }

        return $result;
    }

    /**
     * What writer $writer of round $round left in its keys, having done $done iterations: all
     * of them when it was not killed; else it died in iteration $done (any write of it may
     * have happened or not) or in the saves that end iteration $done - 1 (either may have).
     */
    private function assertWriterKeys(int $round, int $writer, int $done, bool $killed, string $what): void
    {
        $keys = $this->roundKeys($round);
        $complete = $killed ? $done - 1 : $done;
        for ($i = 0; $i < self::ITERATIONS; $i += self::NEW_KEY_EVERY) {
            $count = $this->new->load($this->newKey($round, $writer, $i));
            if ($i < $done) {
                self::assertSame(1, $count, "{$what}: new key n{$i}");
            } elseif ($i === $done) {
                self::assertContains($count, [0, 1], "{$what}: new key n{$i}, of the iteration it died in");
            } else {
                self::assertSame(0, $count, "{$what}: new key n{$i}, of an iteration it never started");
            }
        }
        for ($i = self::STATUS_AT; $i < self::ITERATIONS; $i += self::STATUS_EVERY) {
            $status = $this->new->loadStatus($this->newStatusKey($round, $writer, $i));
            $never = 1; // what loadStatus() returns for a status that is not stored
            if ($i < $complete) {
                self::assertSame($i, $status, "{$what}: new status s{$i}");
            } elseif ($i === $complete) {
                self::assertContains($status, [$never, $i], "{$what}: new status s{$i}, of the iteration it died in");
            } else {
                self::assertSame($never, $status, "{$what}: new status s{$i}, of an iteration it never finished");
            }
        }

        // the last save of iterations 0..$complete - 1 happened; the one of iteration
        // $complete, if any, may have
        $lastSave = static function (int $iteration): ?int {
            $last = $iteration - ((($iteration - self::SAVE_AT) % self::SAVE_EVERY) + self::SAVE_EVERY) % self::SAVE_EVERY;

            return $last >= 0 ? $last : null;
        };
        $allowed = \array_values(\array_unique([$lastSave($complete - 1), $lastSave($complete)], \SORT_REGULAR));
        if (!$killed) {
            $allowed = [$lastSave($done - 1)];
        }
        $lastFailureTime = $this->main->loadLastFailureTime($keys['private'][$writer]);
        self::assertContains(
            $lastFailureTime === null ? null : $lastFailureTime - self::LAST_FAILURE_BASE,
            $allowed,
            "{$what}: last failure time"
        );
        $status = $this->main->loadStatus($keys['private_status'][$writer]);
        self::assertContains(
            $status,
            \array_map(static fn (?int $iteration): int => $iteration ?? 1, $allowed), // 1: not stored
            "{$what}: status"
        );
    }

    /**
     * @param array<string, int> $counts
     * @param array<string, int|null> $lastFailureTimes
     * @param array<string, int|null> $statuses
     */
    private function assertIntact(array $counts, array $lastFailureTimes, array $statuses, string $at): void
    {
        $actual = [];
        foreach ($counts as $key => $count) {
            $actual[$key] = $this->main->load($key);
        }
        self::assertSame($counts, $actual, "{$at}: counts written before");
        $actual = [];
        foreach ($lastFailureTimes as $key => $time) {
            $actual[$key] = $this->main->loadLastFailureTime($key);
        }
        self::assertSame($lastFailureTimes, $actual, "{$at}: last failure times written before");
        $actual = [];
        foreach ($statuses as $key => $status) {
            $actual[$key] = $this->main->loadStatus($key);
        }
        self::assertSame($statuses, $actual, "{$at}: statuses written before");
    }

    /**
     * New writes, in a child given CHECK_DEADLINE_S seconds, so that a store wedged by a kill
     * fails the test rather than hanging it: a new key, a new status, a new key among the slots
     * the killed writers claimed, and one more increment of the shared key.
     *
     * @return array{fresh_new: string}
     */
    private function checkNewWrites(int $round, int $shared, string $at): array
    {
        $keys = $this->roundKeys($round);
        $freshNew = "{$this->newPrefix}r{$round}fresh_failure";
        $main = $this->main;
        $new = $this->new;
        $pair = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        if ($pair === false) {
            throw new \RuntimeException('stream_socket_pair() failed');
        }
        [$read, $write] = $pair;
        $pid = $this->fork(static function () use ($read, $write, $keys, $freshNew, $main, $new): int {
            \fclose($read);
            $main->increment($keys['fresh']);
            $main->saveLastFailureTime($keys['fresh'], 99);
            $main->saveStatus($keys['fresh_status'], 3);
            $new->increment($freshNew);
            $sharedBefore = $main->load($keys['shared']);
            $main->increment($keys['shared']);
            \fwrite($write, \json_encode([
                'fresh' => $main->load($keys['fresh']),
                'fresh_time' => $main->loadLastFailureTime($keys['fresh']),
                'fresh_status' => $main->loadStatus($keys['fresh_status']),
                'fresh_new' => $new->load($freshNew),
                'shared' => [$sharedBefore, $main->load($keys['shared'])],
            ], \JSON_THROW_ON_ERROR));

            return 0;
        });
        \fclose($write);

        $deadline = \microtime(true) + self::CHECK_DEADLINE_S;
        while (($exit = $this->reap($pid)) === null) {
            if (\microtime(true) > $deadline) {
                self::fail(\sprintf('%s: new writes did not complete in %.0f s: the store is wedged', $at, self::CHECK_DEADLINE_S));
            }
            \usleep(1_000);
        }
        $output = (string) \stream_get_contents($read);
        \fclose($read);
        self::assertSame(['how' => 'exit', 'code' => 0], $exit, "{$at}: new writes, output: {$output}");
        self::assertSame(
            ['fresh' => 1, 'fresh_time' => 99, 'fresh_status' => 3, 'fresh_new' => 1, 'shared' => [$shared, $shared + 1]],
            \json_decode($output, true, 512, \JSON_THROW_ON_ERROR),
            "{$at}: new writes"
        );

        return ['fresh_new' => $freshNew];
    }

    /**
     * Forks a child of the PHPUnit process that runs $work and exits with the status it
     * returned (1 when it threw), without running PHPUnit's shutdown code.
     *
     * @param callable(): int $work
     */
    private function fork(callable $work): int
    {
        $pid = \pcntl_fork();
        if ($pid === -1) {
            throw new \RuntimeException('pcntl_fork() failed');
        }
        if ($pid === 0) {
            $status = 1;
            try {
                $status = $work();
            } catch (\Throwable $e) {
                \fwrite(\STDERR, "child: {$e}\n");
            }
            Php::endForkedChild($status);
        }
        $this->children[$pid] = true;

        return $pid;
    }

    /**
     * How child $pid ended, or null if it is still running.
     *
     * @return array{how: string, code: int}|null
     */
    private function reap(int $pid): ?array
    {
        $reaped = \pcntl_waitpid($pid, $status, \WNOHANG);
        if ($reaped === 0) {
            return null;
        }
        if ($reaped !== $pid) {
            throw new \RuntimeException("pcntl_waitpid({$pid}) failed: " . \pcntl_strerror(\pcntl_get_last_error()));
        }
        unset($this->children[$pid]);
        if (\pcntl_wifsignaled($status)) {
            return ['how' => 'signal', 'code' => \pcntl_wtermsig($status)];
        }

        return ['how' => 'exit', 'code' => \pcntl_wifexited($status) ? \pcntl_wexitstatus($status) : -1];
    }
}
