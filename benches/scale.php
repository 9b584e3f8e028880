<?php

/**
 * The scale section of the benchmark, for one capacity (ganesha_shm.max_services is read when
 * PHP starts, so benches/scale.sh runs one process per capacity): prints one JSON object.
 *
 * - "observe": with 100 services stored, the time of the first ganesha_shm_info(), snapshot()
 *   and metrics(), how much the process's RssShmem grew during it (pages faulted in), and the
 *   median time of 9 more;
 * - "ops": at 10 %, 50 % and 100 % of max_services stored (three counters each), the median time
 *   of increment() and load() on an existing key, load() of an absent key, and (when full) of a
 *   new key refused;
 * - "churn" (after 100 %): every service stored so far expires, 10 % of max_services new ones
 *   are stored, and the same calls are timed on those: what lookups cost after churn.
 *
 * Times are medians over repetitions of batches, in nanoseconds per call, as benches/bench.php
 * measures.
 */

declare(strict_types=1);

$ganeshaMissing = require __DIR__ . '/../tests/autoload.php';

use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

const REPETITIONS = 7;
const BATCH = 2_000;

if ($ganeshaMissing !== null) {
    \fwrite(\STDERR, "scale: {$ganeshaMissing}\n");
    exit(1);
}
$capacity = (int) \ini_get('ganesha_shm.max_services');
// Services are stored by an adapter on a clock frozen a year ahead: filling a large store near
// full takes longer than the time window, and the keys stored first must not expire before the
// last ones. The measured calls use the real clock, for which that data never expires.
const FILL_AT = 1_800_000_000 + 365 * 86_400;
$adapter = configure(new SlidingTimeWindowShm());
$filler = configure(new SlidingTimeWindowShm(clock: static fn (): int => FILL_AT));

/** Ganesha's Builder gives an adapter its context (snapshot() and metrics() need its thresholds). */
function configure(SlidingTimeWindowShm $adapter): SlidingTimeWindowShm
{
    Builder::withRateStrategy()
        ->adapter($adapter)
        ->timeWindow(60)
        ->failureRateThreshold(50)
        ->minimumRequests(10)
        ->intervalToHalfOpen(5)
        ->build();

    return $adapter;
}

function rssShmemKb(): int
{
    $status = (string) \file_get_contents('/proc/self/status');

    return \preg_match('/^RssShmem:\s+(\d+) kB/m', $status, $m) === 1 ? (int) $m[1] : -1;
}

/**
 * The first call (its time, and the pages it faulted in), then the median of 9 more.
 *
 * @param \Closure(): void $call
 */
function once(\Closure $call): array
{
    $rss = rssShmemKb();
    $start = \hrtime(true);
    $call();
    $ns = \hrtime(true) - $start;
    $grown = rssShmemKb() - $rss;
    $again = [];
    for ($i = 0; $i < 9; $i++) {
        $start = \hrtime(true);
        $call();
        $again[] = \hrtime(true) - $start;
    }
    \sort($again);

    return ['ms' => \round($ns / 1e6, 3), 'rss_kb' => $grown, 'again_ms' => \round($again[4] / 1e6, 3)];
}

/** @param \Closure(int): void $call called with 0..BATCH-1 */
function perCall(\Closure $call): float
{
    $samples = [];
    // One batch first, not counted: the calls right after filling the store run on cold caches.
    for ($r = -1; $r < REPETITIONS; $r++) {
        $start = \hrtime(true);
        for ($i = 0; $i < BATCH; $i++) {
            $call($i);
        }
        if ($r >= 0) {
            $samples[] = (\hrtime(true) - $start) / BATCH;
        }
    }
    \sort($samples);

    return \round($samples[\intdiv(REPETITIONS, 2)], 1);
}

function serviceKeys(int $service): array
{
    return ["ganesha_s{$service}_success", "ganesha_s{$service}_failure", "ganesha_s{$service}_rejection"];
}

$stored = 0;
$store = static function (int $upTo) use (&$stored, $filler): void {
    for (; $stored < $upTo; $stored++) {
        foreach (serviceKeys($stored) as $key) {
            $filler->increment($key);
        }
    }
};

$result = ['capacity' => $capacity, 'observe' => [], 'ops' => []];

$store(\min(100, $capacity));
$result['observe'] = [
    'info' => once(static function (): void { \ganesha_shm_info(); }),
    'snapshot' => once(static function () use ($adapter): void { $adapter->snapshot(); }),
    'metrics' => once(static function () use ($adapter): void { $adapter->metrics(); }),
];

$percents = \array_map('intval', \explode(' ', (string) (\getenv('PERCENTS') ?: '10 50 100')));
foreach ($percents as $percent) {
    $store(\intdiv($capacity * $percent, 100));
    $existing = \max(1, $stored);
    $row = [
        'increment' => perCall(static function (int $i) use ($adapter, $existing): void {
            $adapter->increment(serviceKeys(($i * 7919) % $existing)[0]);
        }),
        'load' => perCall(static function (int $i) use ($adapter, $existing): void {
            $adapter->load(serviceKeys(($i * 7919) % $existing)[1]);
        }),
        'absent_load' => perCall(static function (int $i) use ($adapter): void {
            $adapter->load("ganesha_absent{$i}_failure");
        }),
    ];
    if ($percent === 100) {
        try {
            $adapter->increment('ganesha_new_failure');
            $row['refused'] = 'not refused';
        } catch (\RuntimeException $e) {
            $row['refused'] = $e->getMessage();
        }
        $row['new_key_when_full'] = perCall(static function (int $i) use ($adapter): void {
            try {
                $adapter->increment("ganesha_new{$i}_failure");
            } catch (\RuntimeException) {
            }
        });
    }
    $result['ops'][$percent] = $row;
}

if (\in_array(100, $percents, true)) {
    // Every key stored so far has expired by then: its data's TTL is the window and a bucket.
    $later = configure(new SlidingTimeWindowShm(clock: static fn (): int => FILL_AT + 3 * 86_400));
    $fresh = \intdiv($capacity, 10);
    for ($service = 0; $service < $fresh; $service++) {
        foreach (serviceKeys($capacity + $service) as $key) {
            $later->increment($key);
        }
    }
    $result['churn'] = [
        'increment' => perCall(static function (int $i) use ($later, $capacity, $fresh): void {
            $later->increment(serviceKeys($capacity + ($i * 7919) % \max(1, $fresh))[0]);
        }),
        'load' => perCall(static function (int $i) use ($later, $capacity, $fresh): void {
            $later->load(serviceKeys($capacity + ($i * 7919) % \max(1, $fresh))[1]);
        }),
        'absent_load' => perCall(static function (int $i) use ($later): void {
            $later->load("ganesha_absent{$i}_failure");
        }),
    ];
}

echo \json_encode($result), "\n";
