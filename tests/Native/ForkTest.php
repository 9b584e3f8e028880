<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\Forks;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The store is created when PHP starts and shared with forked children, as php-fpm shares it
 * with its workers: counts are exact under concurrent increments of many processes.
 *
 * @requires extension pcntl
 * @requires extension posix
 */
#[RequiresPhpExtension('pcntl')]
#[RequiresPhpExtension('posix')]
final class ForkTest extends TestCase
{
    private const CHILDREN = 8;

    public function testConcurrentIncrementsOfOneKeyAreExact(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('fork_one_');

        $statuses = Forks::run(self::CHILDREN, static function () use ($adapter, $key): void {
            for ($i = 0; $i < 1000; ++$i) {
                $adapter->increment($key);
            }
        });

        foreach ($statuses as $i => $status) {
            self::assertSame(0, $status, "child {$i} exit status");
        }
        self::assertSame(self::CHILDREN * 1000, $adapter->load($key));
    }

    /**
     * Run in a PHP process of its own, whose anonymous segment holds nothing else: the slots in
     * use are then this test's alone. (In the suite's segment, a slot of an earlier test whose
     * data expired during the race left the count one short of what this test stored.)
     */
    public function testConcurrentIncrementsOfDistinctAndNewKeysAreExact(): void
    {
        $code = Php::autoloadCode() . \sprintf(
            '$children = %1$d;
            $adapter = \%2$s::forWindow(60);
            $statuses = \%3$s::run($children, static function (int $child) use ($adapter): void {
                // half the children use an adapter of their own, of the same bucket duration (1 s)
                $mine = $child %% 2 === 0 ? $adapter : \%2$s::forWindow(30);
                for ($round = 0; $round < 50; ++$round) {
                    for ($j = 0; $j < 5; ++$j) {
                        if ($round < $child * 5 + $j + 1) {
                            $mine->increment("k{$child}_{$j}");
                        }
                    }
                    // all children race to create, then increment, the same new key
                    $mine->increment("shared");
                    $mine->saveStatus("status", $child + 10);
                    $mine->saveLastFailureTime("shared", $child + 100);
                }
            });
            $loads = [];
            for ($child = 0; $child < $children; ++$child) {
                for ($j = 0; $j < 5; ++$j) {
                    $loads["k{$child}_{$j}"] = $adapter->load("k{$child}_{$j}");
                }
            }
            $info = ganesha_shm_info();
            echo json_encode([
                "statuses" => $statuses,
                "loads" => $loads,
                "shared" => $adapter->load("shared"),
                "status" => $adapter->loadStatus("status"),
                "last_failure_time" => $adapter->loadLastFailureTime("shared"),
                "counter_slots_used" => $info["counter_slots_used"],
                "status_slots_used" => $info["status_slots_used"],
            ]);',
            self::CHILDREN,
            TestAdapter::class,
            Forks::class
        );

        $result = Php::json($code);

        self::assertSame(\array_fill(0, self::CHILDREN, 0), $result['statuses'], 'the children\'s exit statuses');
        for ($child = 0; $child < self::CHILDREN; ++$child) {
            for ($j = 0; $j < 5; ++$j) {
                self::assertSame(\min(50, $child * 5 + $j + 1), $result['loads']["k{$child}_{$j}"], "key {$child}_{$j}");
            }
        }
        self::assertSame(self::CHILDREN * 50, $result['shared']);
        self::assertContains($result['status'], \range(10, 10 + self::CHILDREN - 1));
        self::assertContains($result['last_failure_time'], \range(100, 100 + self::CHILDREN - 1));
        self::assertSame(
            self::CHILDREN * 5 + 1,
            $result['counter_slots_used'],
            'one counter slot per distinct key, however many processes created it at once'
        );
        self::assertSame(1, $result['status_slots_used']);
    }

    public function testTheParentSeesWhatChildrenStoredAndChildrenSeeWhatTheParentStored(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('fork_seen_');
        $adapter->increment($key);
        $adapter->saveStatus($key, 2);

        $statuses = Forks::run(2, static function (int $child) use ($adapter, $key): void {
            if ($adapter->load($key) < 1 || $adapter->loadStatus($key) !== 2) {
                throw new \RuntimeException('the child does not see what the parent stored');
            }
            $adapter->increment($key);
            $adapter->saveLastFailureTime($key . $child, 4242 + $child);
        });

        self::assertSame([0, 0], $statuses);
        self::assertSame(3, $adapter->load($key));
        self::assertSame(4242, $adapter->loadLastFailureTime($key . '0'));
        self::assertSame(4243, $adapter->loadLastFailureTime($key . '1'));
    }

    public function testChildrenThatExitNormallyLeaveTheStoreToTheParent(): void
    {
        // children of a plain `php` process run the whole PHP shutdown, the extension's included,
        // as php-fpm workers do when they are recycled
        $code = Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(60));
            $a->increment("k"); $a->saveStatus("s", 2);
            $pids = [];
            for ($c = 0; $c < 4; ++$c) {
                $pid = pcntl_fork();
                if ($pid === 0) { for ($i = 0; $i < 500; ++$i) { $a->increment("k"); } $a->saveStatus("c" . $c, 3); exit(0); }
                $pids[] = $pid;
            }
            $st = [];
            foreach ($pids as $pid) { pcntl_waitpid($pid, $s); $st[] = pcntl_wifexited($s) ? pcntl_wexitstatus($s) : -1; }
            $r = ["statuses" => $st, "count" => $a->load("k"), "status" => $a->loadStatus("s"), "children" => array_map(fn ($c) => $a->loadStatus("c" . $c), range(0, 3))];
            $a->increment("k"); $a->increment("new");
            $r["count_after"] = $a->load("k"); $r["new"] = $a->load("new");
            echo json_encode($r);',
            TestAdapter::class,
            FakeContext::class
        );

        $result = Php::json($code);

        self::assertSame([0, 0, 0, 0], $result['statuses']);
        self::assertSame(2001, $result['count']);
        self::assertSame(2, $result['status']);
        self::assertSame([3, 3, 3, 3], $result['children']);
        self::assertSame(2002, $result['count_after']);
        self::assertSame(1, $result['new']);
    }

    public function testConcurrentIncrementsAndDecrementsOfACountCounterAreExact(): void
    {
        $adapter = TestAdapter::forCount();
        $key = Unique::name('fork_count_');
        $adapter->save($key, 1000);

        // interleaved, decrement first in half the children: the counter stays within
        // 1000 +/- 4, far from the floor at 0 that would swallow decrements
        $statuses = Forks::run(4, static function (int $child) use ($adapter, $key): void {
            for ($i = 0; $i < 500; ++$i) {
                if ($child % 2 === 0) {
                    $adapter->increment($key);
                    $adapter->decrement($key);
                } else {
                    $adapter->decrement($key);
                    $adapter->increment($key);
                }
            }
        });

        self::assertSame([0, 0, 0, 0], $statuses);
        self::assertSame(1000, $adapter->load($key));
    }

    public function testConcurrentCallersClaimOneHalfOpenTrial(): void
    {
        // the last failure time is 11 s old, the interval to half-open 10 s: of 16 callers at
        // once, one gets the stored time (the trial), the others the time it claimed
        $failedAt = 2_000_000_000;
        $now = $failedAt + 11;
        for ($round = 0; $round < 5; ++$round) {
            $adapter = TestAdapter::forWindow(60, null, null, 10, static fn (): int => $now);
            $key = Unique::name('fork_trial_');
            $adapter->saveLastFailureTime($key, $failedAt);

            $statuses = Forks::run(16, static function () use ($adapter, $key, $failedAt, $now): int {
                return match ($adapter->loadLastFailureTime($key)) {
                    $failedAt => 10,
                    $now => 11,
                    default => 12,
                };
            });

            $counts = \array_count_values($statuses);
            \ksort($counts);
            self::assertSame([10 => 1, 11 => 15], $counts, "round {$round}: 1 trial, 15 callers who saw it taken");
            self::assertSame($now, $adapter->loadLastFailureTime($key));
        }
    }
    /**
     * Each process keeps a memo of the slots it found its keys in. A child forked after its
     * parent counted a key holds the parent's memo; the parent then resets the key and makes
     * others, which take freed slots (4 counter slots for ganesha_shm.max_services=1): neither
     * process trusts its memo of a slot recycled since, in any round, and no count goes astray.
     */
    public function testNoProcessTrustsAMemoOfASlotRecycledSinceAForkChildIncluded(): void
    {
        $code = Php::autoloadCode() . <<<'PHP'
            use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
            $adapter = TestAdapter::forWindow(60);
            $key = 'ganesha_memo_success';
            $rounds = [];
            for ($round = 0; $round < 12; ++$round) {
                $adapter->reset();
                for ($i = 0; $i <= $round; ++$i) {
                    $adapter->increment($key);
                }
                $others = array_map(fn (int $i): string => "ganesha_memo{$round}x{$i}_success", [0, 1, 2]);
                [$parent, $child] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
                $pid = pcntl_fork();
                if ($pid === 0) {
                    fread($child, 1);
                    $seen = [$adapter->load($key), ...array_map([$adapter, 'load'], $others)];
                    fwrite($child, json_encode($seen));
                    exit(0);
                }
                $before = $adapter->load($key);
                $adapter->reset();
                foreach ($others as $other) {
                    $adapter->increment($other);
                }
                $mine = [$adapter->load($key), ...array_map([$adapter, 'load'], $others)];
                fwrite($parent, 'g');
                $seen = json_decode((string) fread($parent, 1000), true);
                pcntl_waitpid($pid, $status);
                $rounds[] = ['before' => $before, 'parent' => $mine, 'child' => $seen];
            }
            echo json_encode(['rounds' => $rounds, 'reclaims' => ganesha_shm_info()['reclaims']]);
            PHP;
        $result = Php::json($code, ['ganesha_shm.max_services' => 1]);
        foreach ($result['rounds'] as $round => $seen) {
            self::assertSame($round + 1, $seen['before'], "round {$round}: counted before the reset");
            self::assertSame([0, 1, 1, 1], $seen['parent'], "round {$round}: the parent after the reset");
            self::assertSame([0, 1, 1, 1], $seen['child'], "round {$round}: the child, with its parent's memo");
        }
    }
}
