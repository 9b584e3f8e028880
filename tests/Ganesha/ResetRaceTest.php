<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha\Builder;
use PHPUnit\Framework\Attributes\DataProvider;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * A reset racing the reads of another process: the reader sees what was saved, or nothing,
 * never an emptied word. An emptied status or last failure time holds the slot's claim
 * generation; read as a value, it stopped trips (a status neither calmed down nor tripped) and
 * took half-open trials that were not due (a last failure time a lifetime old).
 *
 * Each case runs in a process of its own (its own segment, since reset() deletes every key of
 * Ganesha's prefix): a forked child saves and resets one service for a second while the
 * parent reads it through the adapter Ganesha was built with.
 */
final class ResetRaceTest extends GaneshaTestCase
{
    private const SECONDS = 1.0;

    /** @return iterable<string, array{string, string}> */
    public static function resets(): iterable
    {
        yield 'Rate, reset()' => ['rate', 'reset'];
        yield 'Rate, resetService()' => ['rate', 'resetService'];
        yield 'Count, resetService()' => ['count', 'resetService'];
        yield 'Count, reset()' => ['count', 'reset'];
    }

    /** @dataProvider resets */
    #[DataProvider('resets')]
    public function testAReadRacingAResetSeesWhatWasSavedOrNothing(string $strategy, string $reset): void
    {
        $code = Php::autoloadCode(true) . \sprintf(
            ' $a = new \%1$s();
            $b = "%3$s" === "rate"
                ? \%2$s::withRateStrategy()->timeWindow(60)->failureRateThreshold(50)->minimumRequests(10)
                : \%2$s::withCountStrategy()->failureCountThreshold(10);
            $b->adapter($a)->intervalToHalfOpen(1000000)->build();
            $status = "ganesha_svc_status"; $failure = "ganesha_svc_failure";
            // Claims of the slots, so that their generation is neither a status nor a time.
            for ($i = 0; $i < 5; $i++) {
                $a->saveStatus($status, 2); $a->saveLastFailureTime($failure, 1); $a->reset();
            }
            $t = time() - 10;
            $deadline = microtime(true) + %4$F;
            $pid = pcntl_fork();
            if ($pid === 0) {
                while (microtime(true) < $deadline) {
                    $a->saveStatus($status, 2);
                    $a->saveLastFailureTime($failure, $t);
                    if ("%3$s" === "count") { $a->save($failure, 3); }
                    "%5$s" === "reset" ? $a->reset() : $a->resetService("svc");
                }
                exit(0);
            }
            $r = ["reads" => 0, "statuses" => [], "times" => [], "counts" => []];
            $note = static function (array &$seen, $value): void { $k = var_export($value, true); $seen[$k] = ($seen[$k] ?? 0) + 1; };
            while (microtime(true) < $deadline) {
                $r["reads"]++;
                $note($r["statuses"], $a->loadStatus($status));
                $note($r["times"], $a->loadLastFailureTime($failure));
                if ("%3$s" === "count") { $note($r["counts"], $a->load($failure)); }
            }
            pcntl_waitpid($pid, $exit);
            $r["child"] = pcntl_wexitstatus($exit);
            $r["t"] = var_export($t, true);
            $a->saveLastFailureTime($failure, $t);   // the slot and its totals, whatever the last reset left
            $r["trials"] = $a->snapshot()["svc"]["totals"]["half_open_trials"];
            echo json_encode($r);',
            SlidingTimeWindowShm::class,
            Builder::class,
            $strategy,
            self::SECONDS,
            $reset
        );

        $result = Php::json($code);

        self::assertSame(0, $result['child']);
        self::assertGreaterThan(100, $result['reads']);
        $statuses = \array_diff_key($result['statuses'], ['1' => 0, '2' => 0]);
        self::assertSame([], $statuses, 'statuses read that were never saved (value => times)');
        $times = \array_diff_key($result['times'], ['NULL' => 0, $result['t'] => 0]);
        self::assertSame([], $times, 'last failure times read that were never saved (value => times)');
        self::assertSame([], \array_diff_key($result['counts'], ['0' => 0, '3' => 0]), 'counts never saved');
        self::assertSame(0, $result['trials'], 'half-open trials counted since the last reset, none of them due');
    }

    protected function tearDown(): void
    {
        VirtualClock::reset();
    }
}
