<?php

/**
 * Benchmark of SlidingTimeWindowShm against Ganesha's own adapters (Apcu, Redis) and a
 * do-nothing adapter, the floor: what Ganesha itself costs.
 *
 * Run it with `bash benches/run.sh`, which installs what is missing, builds the extension and
 * starts (and stops) a private redis-server. By hand:
 *
 *   BENCH_REDIS_PORT=<port of a scratch redis-server on 127.0.0.1> \
 *   php -d extension=target/release/libganesha_shm.so -d apc.enable_cli=1 benches/bench.php
 *
 * Every figure comes from this one run: the adapters take turns (round-robin) within each
 * repetition, so that noise from the rest of the machine falls on all of them alike, and the
 * ratios to the floor are taken repetition by repetition.
 *
 * A benchmark, not a test: it reports whether the project's targets are met and exits 0 either
 * way (1 only when it cannot run at all: the extension is not loaded).
 */

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Benches;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Storage\Adapter\Apcu as GaneshaApcu;
use Ackintosh\Ganesha\Storage\Adapter\Redis as GaneshaRedis;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

const REPETITIONS = 7;
const REPETITION_NS = 120_000_000; // one repetition of one workload on one adapter
const CALIBRATION_NS = 30_000_000; // warm-up that also sizes the repetitions
const MP_PROCESSES = [1, 2, 4];
const MP_ROUNDS = 5;
const MP_SECONDS = 0.5;             // one run: one process count on one adapter
const MEMORY_SERVICES = 200;
const TIME_WINDOW = 60;             // 60 buckets of 1 s

const TARGET_FLOOR_RATIO = 1.3;     // workload (a): SlidingTimeWindowShm / floor
const TARGET_REQUEST_RATIO = 1.1;   // workload (e): a request, SlidingTimeWindowShm / floor
const TARGET_SCALING = 0.95;        // 4p/1p of SlidingTimeWindowShm / 4p/1p of the floor
const TARGET_BYTES = 4096;          // shared memory per service at 60 buckets

if (!\extension_loaded('ganesha_shm')) {
    \fwrite(\STDERR, "bench: the ganesha_shm extension is not loaded: run `bash benches/run.sh`, or\n"
        . "  php -d extension=/abs/path/target/release/libganesha_shm.so -d apc.enable_cli=1 benches/bench.php\n");
    exit(1);
}

$ganeshaMissing = require \dirname(__DIR__) . '/tests/autoload.php';
if ($ganeshaMissing === null && !\interface_exists(Ganesha\Storage\AdapterInterface::class)) {
    $ganeshaMissing = 'Ganesha is not loadable';
}
require __DIR__ . '/NullAdapter.php';

// ---------------------------------------------------------------------------------------------
// Without Ganesha: the native class, configured by a duck-typed context as Ganesha's Builder would.

final class BareShm extends AbstractSlidingTimeWindowShm
{
}

final class DuckKeys
{
    public function prefix(): string { return 'ganesha_'; }
    public function success(): string { return '_success'; }
    public function failure(): string { return '_failure'; }
    public function rejection(): string { return '_rejection'; }
    public function lastFailureTime(): string { return '_last_failure_time'; }
    public function status(): string { return '_status'; }
}

final class DuckConfiguration
{
    public function timeWindow(): int { return TIME_WINDOW; }
    public function intervalToHalfOpen(): int { return 3600; }
    public function storageKeys(): DuckKeys { return new DuckKeys(); }
}

final class DuckContext
{
    public function strategy(): string { return 'rate_sliding_time_window'; }
    public function configuration(): DuckConfiguration { return new DuckConfiguration(); }
}

// ---------------------------------------------------------------------------------------------
// The adapters compared.

final class Contender
{
    /**
     * @param \Closure(): object $make a new adapter (for Redis, over a connection of its own)
     */
    public function __construct(
        public readonly string $id,
        public readonly string $label,
        public readonly \Closure $make,
        public readonly ?string $skip = null,
    ) {
    }
}

/** Events Ganesha notified: a workload that trips or hits a storage error did not run as meant. */
final class Events
{
    /** @var list<string> */
    public array $seen = [];
}

/**
 * @param array{threshold: int, minimum: int, halfOpen: int} $config
 */
function ganesha(object $adapter, array $config, Events $events): Ganesha
{
    $ganesha = Builder::withRateStrategy()
        ->adapter($adapter)
        ->timeWindow(TIME_WINDOW)
        ->failureRateThreshold($config['threshold'])
        ->minimumRequests($config['minimum'])
        ->intervalToHalfOpen($config['halfOpen'])
        ->build();
    $ganesha->subscribe(static function (string $event, string $service, string $message) use ($events): void {
        $events->seen[] = \trim("{$event} {$service} {$message}");
    });

    return $ganesha;
}

/** An adapter configured for TIME_WINDOW, used without a Ganesha around it (workload d). */
function configured(Contender $contender, bool $withGanesha): object
{
    $adapter = ($contender->make)();
    if ($withGanesha) {
        ganesha($adapter, ['threshold' => 50, 'minimum' => 10, 'halfOpen' => 5], new Events());
    } elseif ($adapter instanceof AbstractSlidingTimeWindowShm) {
        $adapter->setContext(new DuckContext());
    }

    return $adapter;
}

/** @return list<Contender> */
function contenders(bool $withGanesha): array
{
    $list = [new Contender('floor', 'do-nothing (floor)', static fn (): object => new NullAdapter())];
    if (!$withGanesha) {
        $list[] = new Contender('shm', 'SlidingTimeWindowShm', static fn (): object => new BareShm());
        return $list;
    }
    $list[] = new Contender('shm', 'SlidingTimeWindowShm', static fn (): object => new SlidingTimeWindowShm());

    $apcuSkip = null;
    if (!\extension_loaded('apcu')) {
        $apcuSkip = 'the apcu extension is not loaded (Debian: apt-get install php-apcu)';
    } elseif (!\apcu_enabled()) {
        $apcuSkip = 'APCu is disabled in this SAPI: run with -d apc.enable_cli=1';
    }
    $list[] = new Contender('apcu', 'Ganesha Apcu', static fn (): object => new GaneshaApcu(), $apcuSkip);

    $port = (int) \getenv('BENCH_REDIS_PORT');
    $redisSkip = null;
    if (!\extension_loaded('redis')) {
        $redisSkip = 'the redis extension (phpredis) is not loaded (Debian: apt-get install php-redis)';
    } elseif ($port <= 0) {
        $why = \getenv('BENCH_REDIS_SKIP');
        $redisSkip = \is_string($why) && $why !== '' ? $why : 'no redis-server: set BENCH_REDIS_PORT, or run benches/run.sh, which starts one';
    } else {
        try {
            $probe = new \Redis();
            $probe->connect('127.0.0.1', $port, 2.0);
            $probe->ping();
            $probe->close();
        } catch (\Throwable $e) {
            $redisSkip = "redis-server on 127.0.0.1:{$port} does not answer: " . $e->getMessage();
        }
    }
    $list[] = new Contender('redis', 'Ganesha Redis (phpredis, loopback)', static function () use ($port): object {
        $client = new \Redis();
        $client->connect('127.0.0.1', $port, 2.0);
        return new GaneshaRedis($client);
    }, $redisSkip);

    return $list;
}

// ---------------------------------------------------------------------------------------------
// Workloads. Each loop runs $n operations and returns [nanoseconds, operations off the path].

/** (a) a healthy service: isAvailable() then success(). */
function loopHealthy(object $ganesha, string $service, int $n): array
{
    $off = 0;
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        if ($ganesha->isAvailable($service)) {
            $ganesha->success($service);
        } else {
            ++$off;
        }
    }
    return [\hrtime(true) - $start, $off];
}

/** (b) a tripped service: isAvailable() rejected. */
function loopRejected(object $ganesha, string $service, int $n): array
{
    $off = 0;
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        if ($ganesha->isAvailable($service)) {
            ++$off;
        }
    }
    return [\hrtime(true) - $start, $off];
}

/** (c) failure() on a service that stays just closed. */
function loopFailure(object $ganesha, string $service, int $n): array
{
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        $ganesha->failure($service);
    }
    return [\hrtime(true) - $start, 0];
}

/** (d) the adapter alone: increment(). */
function loopIncrement(object $adapter, string $key, int $n): array
{
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        $adapter->increment($key);
    }
    return [\hrtime(true) - $start, 0];
}

/** (d) the adapter alone: load() of a 60-bucket window. */
function loopLoad(object $adapter, string $key, int $n): array
{
    $off = 0;
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        if ($adapter->load($key) < 1) {
            ++$off;
        }
    }
    return [\hrtime(true) - $start, $off];
}

/** (e) requests as php-fpm serves them: each builds its adapter and Ganesha, then (a). */
function loopRequest(Request $request, string $service, int $n): array
{
    $off = 0;
    $start = \hrtime(true);
    for ($i = 0; $i < $n; ++$i) {
        $ganesha = $request->ganesha();
        if ($ganesha->isAvailable($service)) {
            $ganesha->success($service);
        } else {
            ++$off;
        }
    }
    return [\hrtime(true) - $start, $off];
}

/**
 * What a request builds, PHP sharing nothing between requests: `new` the adapter, then
 * Builder::...->build(), which calls setContext().
 */
final class Request
{
    /** @param array{threshold: int, minimum: int, halfOpen: int} $config */
    public function __construct(private Contender $contender, private array $config)
    {
    }

    public function ganesha(): Ganesha
    {
        return Builder::withRateStrategy()
            ->adapter(($this->contender->make)())
            ->timeWindow(TIME_WINDOW)
            ->failureRateThreshold($this->config['threshold'])
            ->minimumRequests($this->config['minimum'])
            ->intervalToHalfOpen($this->config['halfOpen'])
            ->build();
    }
}

final class Workload
{
    /**
     * @param array{threshold: int, minimum: int, halfOpen: int}|null $config null: the adapter alone
     * @param \Closure(object $subject, object $adapter, string $service): void $prime
     * @param \Closure(NullAdapter $floor, string $service): void $canned what the floor answers
     * @param bool $perRequest whether each operation builds its own adapter and Ganesha (e)
     */
    public function __construct(
        public readonly string $id,
        public readonly string $label,
        public readonly string $loop,
        public readonly ?array $config,
        public readonly \Closure $prime,
        public readonly \Closure $canned,
        public readonly bool $perRequest = false,
    ) {
    }
}

/** @return list<Workload> */
function workloads(bool $withGanesha): array
{
    $nothing = static function (): void {
    };
    $list = [];
    if ($withGanesha) {
        $list[] = new Workload('a', '(a) healthy: isAvailable() + success()', __NAMESPACE__ . '\loopHealthy',
            ['threshold' => 50, 'minimum' => 10, 'halfOpen' => 5], $nothing, $nothing);
        // 20 failures trip it; the half-open interval is never reached during the run
        $list[] = new Workload('b', '(b) tripped: isAvailable() rejected', __NAMESPACE__ . '\loopRejected',
            ['threshold' => 50, 'minimum' => 10, 'halfOpen' => 3600],
            static function (object $ganesha, object $adapter, string $service): void {
                for ($i = 0; $i < 20; ++$i) {
                    $ganesha->failure($service);
                }
            },
            static function (NullAdapter $floor, string $service): void {
                $floor->canned("ganesha_{$service}_failure", 20, \time());
            });
        // threshold 100 %, one success first: every failure() reads the status and all three
        // counters (failures >= minimumRequests) and the circuit never trips
        $list[] = new Workload('c', '(c) failure() near the threshold, 3 counters read', __NAMESPACE__ . '\loopFailure',
            ['threshold' => 100, 'minimum' => 2, 'halfOpen' => 3600],
            static function (object $ganesha, object $adapter, string $service): void {
                $ganesha->success($service);
                $ganesha->failure($service);
                $ganesha->failure($service);
            },
            static function (NullAdapter $floor, string $service): void {
                $floor->canned("ganesha_{$service}_failure", 2);
                $floor->canned("ganesha_{$service}_success", 1);
            });
        // Ganesha's Redis adapter connects once per request here, as a php-fpm worker does
        // without persistent connections.
        $list[] = new Workload('e', '(e) a request: new adapter + build() + (a)', __NAMESPACE__ . '\loopRequest',
            ['threshold' => 50, 'minimum' => 10, 'halfOpen' => 5], $nothing, $nothing, perRequest: true);
    }
    $list[] = new Workload('d1', '(d) adapter alone: increment()', __NAMESPACE__ . '\loopIncrement', null, $nothing, $nothing);
    $list[] = new Workload('d2', '(d) adapter alone: load(), 60 buckets', __NAMESPACE__ . '\loopLoad', null,
        static function (object $subject, object $adapter, string $key): void {
            $adapter->increment($key);
        },
        static function (NullAdapter $floor, string $service): void {
            $floor->canned("ganesha_{$service}_success", 1);
        });

    return $list;
}

/** A subject ready to run $workload on: a Ganesha, or the adapter alone, and its key. */
final class Setup
{
    private static int $serial = 0;

    public readonly object $adapter;
    public readonly object $subject;

    public function __construct(Workload $workload, Contender $contender, bool $withGanesha, public readonly Events $events)
    {
        $this->adapter = $workload->config === null ? configured($contender, $withGanesha) : ($contender->make)();
        $this->subject = match (true) {
            $workload->config === null => $this->adapter,
            $workload->perRequest => new Request($contender, $workload->config),
            default => ganesha($this->adapter, $workload->config, $events),
        };
    }

    /** A new service (or key), primed for the workload; events of the priming are forgotten. */
    public function fresh(Workload $workload, string $contenderId): string
    {
        $service = \sprintf('bench-%s-%s-%d', $workload->id, $contenderId, ++self::$serial);
        $target = $workload->config === null ? "ganesha_{$service}_success" : $service;
        if ($this->adapter instanceof NullAdapter) {
            ($workload->canned)($this->adapter, $service);
        } else {
            ($workload->prime)($this->subject, $this->adapter, $target);
        }
        $this->events->seen = [];

        return $target;
    }
}

// ---------------------------------------------------------------------------------------------
// Reporting helpers.

function median(array $values): float
{
    \sort($values);
    $n = \count($values);
    return $n % 2 === 1 ? (float) $values[intdiv($n, 2)] : ($values[$n / 2 - 1] + $values[$n / 2]) / 2;
}

function ns(float $ns): string
{
    if ($ns >= 100_000) {
        return \number_format($ns / 1000, 0) . ' µs';
    }
    if ($ns >= 10_000) {
        return \number_format($ns / 1000, 1) . ' µs';
    }
    return \number_format($ns, 0) . ' ns';
}

function ratio(float $r): string
{
    return $r >= 100 ? \number_format($r, 0) . '×' : ($r >= 10 ? \number_format($r, 1) . '×' : \number_format($r, 2) . '×');
}

function say(string $line = ''): void
{
    echo $line, "\n";
}

/** Prints rows of cells, columns padded to their widest cell (multibyte-aware). */
function table(array $rows, array $rightAligned = []): void
{
    $widths = [];
    foreach ($rows as $row) {
        foreach (\array_values($row) as $i => $cell) {
            $widths[$i] = \max($widths[$i] ?? 0, \mb_strwidth((string) $cell));
        }
    }
    foreach ($rows as $row) {
        $line = '';
        foreach (\array_values($row) as $i => $cell) {
            $pad = \str_repeat(' ', $widths[$i] - \mb_strwidth((string) $cell));
            $line .= ($i === 0 ? '  ' : '   ') . (\in_array($i, $rightAligned, true) ? $pad . $cell : $cell . $pad);
        }
        say(\rtrim($line));
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Memory per service.

/** @return int|null shared-memory bytes per service, measured */
function memory(bool $withGanesha, array $contenders): ?int
{
    $n = MEMORY_SERVICES;
    say(\sprintf('MEMORY per service: failure, success and rejection counters, last failure time, status; %d buckets of 1 s; %d services created', TIME_WINDOW, $n));
    $info = \ganesha_shm_info();
    $config = ['threshold' => 50, 'minimum' => 1, 'halfOpen' => 3600];
    $events = new Events();

    // Each service: one failure (trips it: minimumRequests 1), one rejected isAvailable(), one success.
    $create = static function (object $ganesha, string $stem) use ($n): int {
        $rejected = 0;
        for ($i = 0; $i < $n; ++$i) {
            $service = \sprintf('%s-%04d', $stem, $i);
            $ganesha->failure($service);
            $rejected += $ganesha->isAvailable($service) ? 0 : 1;
            $ganesha->success($service);
        }
        return $rejected;
    };

    if ($withGanesha) {
        $rejected = $create(ganesha(new SlidingTimeWindowShm(), $config, $events), 'memory-shm');
    } else {
        $adapter = new BareShm();
        $adapter->setContext(new DuckContext());
        for ($i = 0; $i < $n; ++$i) {
            $key = \sprintf('ganesha_memory-shm-%04d', $i);
            $adapter->increment("{$key}_failure");
            $adapter->saveLastFailureTime("{$key}_failure", \time());
            $adapter->increment("{$key}_rejection");
            $adapter->increment("{$key}_success");
            $adapter->saveStatus("{$key}_status", 2);
        }
        $rejected = $n;
    }
    $after = \ganesha_shm_info();
    $counters = $after['counter_slots_used'] - $info['counter_slots_used'];
    $statuses = $after['status_slots_used'] - $info['status_slots_used'];
    $measured = (int) \round(($counters * $after['counter_slot_bytes'] + $statuses * $after['status_slot_bytes']) / $n);
    $rows = [['adapter', 'bytes/service', 'how it is counted']];
    $rows[] = ['SlidingTimeWindowShm', \number_format($after['bytes_per_service']) . ' B',
        \sprintf('ganesha_shm_info()[bytes_per_service]: 3 × %s B counter slot + %s B status slot, with half as many again of headroom',
            \number_format($after['counter_slot_bytes']), \number_format($after['status_slot_bytes']))];
    $rows[] = ['', \number_format($measured) . ' B', \sprintf('measured: +%d counter slots × %s B + %d status slots × %s B, / %d services%s',
        $counters, \number_format($after['counter_slot_bytes']), $statuses, \number_format($after['status_slot_bytes']), $n,
        $rejected === $n ? '' : " (only {$rejected} services tripped: rejection counters missing)")];
    $rows[] = ['', '', \sprintf('segment reserved at startup: %s B for ganesha_shm.max_services = %d',
        \number_format($after['segment_bytes']), $after['max_services'])];

    $apcu = null;
    foreach ($contenders as $contender) {
        if ($contender->id === 'apcu') {
            $apcu = $contender;
        }
    }
    if ($apcu === null) {
        $rows[] = ['Ganesha Apcu', '-', 'skipped: ' . ($GLOBALS['ganeshaMissing'] ?? 'Ganesha is not loadable')];
    } elseif ($apcu->skip !== null) {
        $rows[] = ['Ganesha Apcu', '-', 'skipped: ' . $apcu->skip];
    } else {
        $ganesha = ganesha(new GaneshaApcu(), $config, $events);
        $ganesha->isAvailable('memory-apcu-warm'); // APCu's own first allocations out of the way
        $sma = \apcu_sma_info(true)['avail_mem'];
        $entries = \apcu_cache_info(true)['num_entries'];
        $create($ganesha, 'memory-apcu');
        $used = $sma - \apcu_sma_info(true)['avail_mem'];
        $newEntries = \apcu_cache_info(true)['num_entries'] - $entries;
        $rows[] = ['Ganesha Apcu', \number_format((int) \round($used / $n)) . ' B',
            \sprintf('measured: apcu_sma_info() avail_mem −%s B for %d entries (%g per service), / %d services',
                \number_format($used), $newEntries, $newEntries / $n, $n)];
    }
    table($rows, [1]);
    say('  (keys "ganesha_memory-shm-0000_failure" etc.; Redis keeps one sorted-set member per request in the window: it grows with traffic)');
    say();

    return \max($measured, $after['bytes_per_service']);
}

// ---------------------------------------------------------------------------------------------
// 2. Single-process latency, round-robin over the adapters.

/**
 * @param list<Contender> $contenders
 * @param list<Workload> $workloads
 * @return array<string, array<string, list<float>>> ns per operation by workload and contender
 */
function latency(array $contenders, array $workloads, bool $withGanesha, array &$offPath): array
{
    $setups = [];
    $iterations = [];
    foreach ($workloads as $workload) {
        foreach ($contenders as $contender) {
            $setup = new Setup($workload, $contender, $withGanesha, new Events());
            $setups[$workload->id][$contender->id] = $setup;
            // warm-up, which also sizes the repetitions of this pair
            $key = $setup->fresh($workload, $contender->id);
            $loop = $workload->loop;
            $spent = 0;
            $done = 0;
            for ($n = 1; $spent < CALIBRATION_NS; $n *= 2) {
                [$elapsed] = $loop($setup->subject, $key, $n);
                $spent += $elapsed;
                $done += $n;
            }
            $iterations[$workload->id][$contender->id] = \max(20, (int) \ceil(REPETITION_NS * $done / $spent));
        }
    }

    $results = [];
    $count = \count($contenders);
    for ($rep = 0; $rep < REPETITIONS; ++$rep) {
        foreach ($workloads as $workload) {
            for ($k = 0; $k < $count; ++$k) {
                $contender = $contenders[($k + $rep) % $count];
                $setup = $setups[$workload->id][$contender->id];
                $n = $iterations[$workload->id][$contender->id];
                $key = $setup->fresh($workload, $contender->id);
                $loop = $workload->loop;
                $loop($setup->subject, $key, \max(1, intdiv($n, 20))); // warm the caches again
                $setup->events->seen = [];
                [$elapsed, $off] = $loop($setup->subject, $key, $n);
                $results[$workload->id][$contender->id][] = $elapsed / $n;
                if ($off !== 0 || $setup->events->seen !== []) {
                    $offPath[$workload->id][$contender->id][] = \sprintf('repetition %d: %d of %d operations off the path%s',
                        $rep + 1, $off, $n,
                        $setup->events->seen === [] ? '' : '; events: ' . \implode(', ', \array_slice(\array_unique($setup->events->seen), 0, 2)));
                }
            }
        }
    }

    return $results;
}

// ---------------------------------------------------------------------------------------------
// 3. Several processes on one service: workload (a) for a fixed time.

/**
 * @return array{float, ?string} operations per second of all processes together, or an error
 */
function processes(Contender $contender, string $service, int $processes): array
{
    $config = ['threshold' => 50, 'minimum' => 10, 'halfOpen' => 5];
    $children = [];
    \flush();
    for ($p = 0; $p < $processes; ++$p) {
        [$parentEnd, $childEnd] = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        $pid = \pcntl_fork();
        if ($pid === -1) {
            return [0.0, 'pcntl_fork() failed'];
        }
        if ($pid === 0) {
            \fclose($parentEnd);
            child($contender, $config, $service, $childEnd);
        }
        \fclose($childEnd);
        \stream_set_timeout($parentEnd, 60);
        $children[$pid] = $parentEnd;
    }

    $error = null;
    foreach ($children as $socket) {
        $ready = \fgets($socket);
        if ($ready !== "ready\n") {
            $error ??= 'a child did not start: ' . \trim((string) $ready);
        }
    }
    $deadline = \hrtime(true) + (int) (MP_SECONDS * 1e9);
    foreach ($children as $socket) {
        \fwrite($socket, "{$deadline}\n");
    }
    $rate = 0.0;
    foreach ($children as $pid => $socket) {
        $line = \trim((string) \fgets($socket));
        if (\preg_match('/^(\d+) (\d+)$/', $line, $m) === 1 && (int) $m[2] > 0) {
            $rate += (int) $m[1] / ((int) $m[2] / 1e9);
        } else {
            $error ??= 'a child failed: ' . ($line === '' ? 'no answer' : $line);
        }
        \fclose($socket);
        \pcntl_waitpid($pid, $status);
    }

    return [$rate, $error];
}

/** A child of processes(): builds its own Ganesha, waits for the start, runs, reports, ends. */
function child(Contender $contender, array $config, string $service, $socket): never
{
    try {
        $ganesha = ganesha(($contender->make)(), $config, new Events());
        loopHealthy($ganesha, $service, 100);
        \fwrite($socket, "ready\n");
        $deadline = (int) \fgets($socket);
        $operations = 0;
        $start = \hrtime(true);
        do {
            loopHealthy($ganesha, $service, 32);
            $operations += 32;
        } while (\hrtime(true) < $deadline);
        \fwrite($socket, $operations . ' ' . (\hrtime(true) - $start) . "\n");
    } catch (\Throwable $e) {
        \fwrite($socket, \str_replace("\n", ' ', \get_class($e) . ': ' . $e->getMessage()) . "\n");
    }
    \fflush($socket);
    // End without PHP's shutdown (destructors, the parent's connections and segments)
    @\pcntl_exec('/bin/true');
    \function_exists('posix_kill') && \posix_kill(\posix_getpid(), \SIGKILL);
    exit(0);
}

// ---------------------------------------------------------------------------------------------
// Main.

$withGanesha = $ganeshaMissing === null;
$startedAt = \hrtime(true);
$info = \ganesha_shm_info();
$cpus = (int) \trim((string) @\shell_exec('nproc 2>/dev/null')) ?: '?'; // int, or '?' when unknown
say(\sprintf('ganesha_shm %s benchmark — PHP %s%s, opcache %s, %s CPUs, load average %s',
    $info['version'], \PHP_VERSION, \PHP_ZTS ? ' ZTS' : '',
    \ini_get('opcache.enable_cli') === '1' && \function_exists('opcache_get_status') ? 'on' : 'off',
    $cpus, \implode(' ', \array_map(static fn (float $l): string => \number_format($l, 2), \sys_getloadavg() ?: []))));
if (!$withGanesha) {
    say("Ganesha is not available, so only workload (d), the adapter alone, runs: {$ganeshaMissing}");
}
$contenders = contenders($withGanesha);
foreach ($contenders as $contender) {
    if ($contender->skip !== null) {
        say("{$contender->label}: skipped: {$contender->skip}");
    }
}
$running = \array_values(\array_filter($contenders, static fn (Contender $c): bool => $c->skip === null));
say();

$bytesPerService = memory($withGanesha, $contenders);

$workloads = workloads($withGanesha);
$offPath = [];
$results = latency($running, $workloads, $withGanesha, $offPath);

say(\sprintf('LATENCY, one process: median ns per operation over %d repetitions (min–max), adapters in turn within each;', REPETITIONS));
say('× floor: median of the per-repetition ratios to the do-nothing adapter (min–max)');
$rows = [['workload', 'adapter', 'median', 'min–max', '× floor', 'min–max']];
$ratios = [];
foreach ($workloads as $workload) {
    $first = true;
    foreach ($running as $contender) {
        $samples = $results[$workload->id][$contender->id];
        $perRep = [];
        foreach ($samples as $rep => $value) {
            $perRep[] = $value / $results[$workload->id]['floor'][$rep];
        }
        $ratios[$workload->id][$contender->id] = median($perRep);
        $rows[] = [
            $first ? $workload->label : '',
            $contender->label,
            ns(median($samples)),
            ns(\min($samples)) . '–' . ns(\max($samples)),
            ratio(median($perRep)),
            ratio(\min($perRep)) . '–' . ratio(\max($perRep)),
        ];
        $first = false;
    }
}
table($rows, [2, 3, 4, 5]);
foreach ($offPath as $workloadId => $byContender) {
    foreach ($byContender as $contenderId => $notes) {
        say("  note: {$workloadId} on {$contenderId} did not stay on the workload's path in " . \count($notes) . ' repetition(s): ' . $notes[0]);
    }
}
say();

$scaling = [];
$relative = [];
if ($withGanesha && \function_exists('pcntl_fork')) {
    say(\sprintf('THROUGHPUT, several processes on one service: workload (a), %.1f s per run; %d rounds, in each every adapter', MP_SECONDS, MP_ROUNDS));
    say('in turn runs 1, 2 and 4 processes back to back. Operations per second of all processes together (median;');
    say('one operation = isAvailable() + success()); 4p/1p and its ratio to the floor\'s: medians of the per-round figures (min–max)');
    $rates = [];
    $errors = [];
    $count = \count($running);
    for ($round = 0; $round < MP_ROUNDS; ++$round) {
        for ($k = 0; $k < $count; ++$k) {
            $contender = $running[($k + $round) % $count];
            foreach ($round % 2 === 0 ? MP_PROCESSES : \array_reverse(MP_PROCESSES) as $processes) {
                [$rate, $error] = processes($contender, "bench-mp-{$contender->id}-{$processes}-{$round}", $processes);
                if ($error !== null) {
                    $errors[$contender->id] ??= $error;
                }
                $rates[$contender->id][$processes][$round] = $rate;
            }
        }
    }
    $perRound = [];
    foreach ($running as $contender) {
        for ($round = 0; $round < MP_ROUNDS; ++$round) {
            $one = $rates[$contender->id][1][$round];
            $perRound[$contender->id][$round] = $one > 0 ? $rates[$contender->id][4][$round] / $one : 0.0;
        }
    }
    $rows = [['adapter', '1 process', '2 processes', '4 processes', '4p/1p', 'min–max', '÷ floor\'s', 'min–max']];
    foreach ($running as $contender) {
        $id = $contender->id;
        $quotients = [];
        foreach ($perRound[$id] as $round => $ratio) {
            $floorRatio = $perRound['floor'][$round];
            $quotients[] = $floorRatio > 0 ? $ratio / $floorRatio : 0.0;
        }
        $scaling[$id] = median($perRound[$id]);
        $relative[$id] = median($quotients);
        $rows[] = [
            $contender->label,
            \number_format(median($rates[$id][1]), 0) . '/s',
            \number_format(median($rates[$id][2]), 0) . '/s',
            \number_format(median($rates[$id][4]), 0) . '/s',
            \number_format($scaling[$id], 2),
            \number_format(\min($perRound[$id]), 2) . '–' . \number_format(\max($perRound[$id]), 2),
            \number_format($relative[$id] * 100, 0) . ' %',
            \number_format(\min($quotients) * 100, 0) . '–' . \number_format(\max($quotients) * 100, 0) . ' %',
        ];
    }
    table($rows, [1, 2, 3, 4, 5, 6, 7]);
    foreach ($errors as $id => $error) {
        say("  note: {$id}: {$error}");
    }
    if (isset($scaling['redis'])) {
        say('  (Redis mostly waits for round trips, which more processes overlap: it scales beyond the CPUs)');
    }
    $expected = \min(4, \is_int($cpus) ? $cpus : 4);
    if ($scaling['floor'] < 0.75 * $expected) {
        say(\sprintf('  WARNING: the floor\'s 4p/1p is %.2f where %d CPUs give about %d: other processes took CPU time during these runs,',
            $scaling['floor'], $expected, $expected));
        say('  so these figures measure the machine\'s load more than the adapters; run again on a quieter machine');
    }
    say();
} elseif ($withGanesha) {
    say('THROUGHPUT, several processes: skipped: the pcntl extension is not loaded');
    say();
}

say('TARGETS (a benchmark: reported, never enforced)');
$targets = [];
if (isset($ratios['a']['shm'])) {
    $r = $ratios['a']['shm'];
    $targets[] = [$r <= TARGET_FLOOR_RATIO, \sprintf('workload (a): SlidingTimeWindowShm within %.1f× of the floor: %s', TARGET_FLOOR_RATIO, ratio($r))];
} else {
    $targets[] = [null, 'workload (a): SlidingTimeWindowShm within 1.3× of the floor: not measured (needs Ganesha)'];
}
if (isset($ratios['e']['shm'])) {
    $r = $ratios['e']['shm'];
    $targets[] = [$r <= TARGET_REQUEST_RATIO, \sprintf('workload (e): a request with SlidingTimeWindowShm within %.2f× of the floor\'s: %s (benches/profile.sh counts its instructions)', TARGET_REQUEST_RATIO, ratio($r))];
}
if (isset($relative['shm'])) {
    $targets[] = [$relative['shm'] >= TARGET_SCALING, \sprintf('4-process/1-process throughput ratio of SlidingTimeWindowShm ≥ %d %% of the floor\'s: %.1f %% (%.3f vs %.3f)',
        TARGET_SCALING * 100, $relative['shm'] * 100, $scaling['shm'], $scaling['floor'])];
} else {
    $targets[] = [null, 'multi-process scaling: not measured (needs Ganesha and pcntl)'];
}
$targets[] = [$bytesPerService <= TARGET_BYTES, \sprintf('at most %s B of shared memory per service at 60 buckets (ganesha_shm.max_buckets=%d): %s B',
    \number_format(TARGET_BYTES), \ini_get('ganesha_shm.max_buckets'), \number_format($bytesPerService))];
foreach ($targets as [$met, $text]) {
    say(\sprintf('  [%s] %s', $met === null ? 'not measured' : ($met ? 'met' : 'NOT MET'), $text));
}
say(\sprintf('(run took %.0f s; load average now %s)', (\hrtime(true) - $startedAt) / 1e9,
    \implode(' ', \array_map(static fn (float $l): string => \number_format($l, 2), \sys_getloadavg() ?: []))));
exit(0);
