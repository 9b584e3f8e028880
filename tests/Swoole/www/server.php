<?php

/*
 * The swoole suite's server (tests/Swoole/SwooleServer.php starts it): a Swoole\Http\Server in
 * SWOOLE_PROCESS mode on 127.0.0.1, whose workers serve circuits of the real Ganesha,
 * Builder::withRateStrategy() over SlidingTimeWindowShm, built anew by every request as the
 * fpm and apache suites' scripts do. Run by `php -n -d extension=<swoole.so> -d extension=<the
 * extension>`: PHP's startup in this process creates the segment; Swoole's manager, forked by
 * this master, forks the workers (and replaces those that die), which all inherit it.
 *
 *   php server.php PORT WORKERS on|off DIR
 *
 * on|off: Swoole\Runtime::enableCoroutine() with every hook (but curl's), or none, before the
 * server starts; every answer says the hook flags the worker runs with. DIR: the pid file,
 * Swoole's log, and the barriers (SwooleServer::barrier()).
 *
 * Query: op (below), service, window, threshold, minimum, interval (the Builder's timeWindow,
 * failureRateThreshold, minimumRequests, intervalToHalfOpen), now (a fixed time for Ganesha and
 * the adapter, through the tests' VirtualClock; default: the system's), barrier and parties.
 * The JSON answer says which worker (pid) and which coroutine served it, and the events Ganesha
 * notified; any notice or exception answers a 500 saying why, so that no test reads a half-right
 * answer.
 *
 * The VirtualClock is one per worker, set by each request before it builds its Ganesha: requests
 * a test has in flight together give the same `now`.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Swoole\Coroutine;
use Swoole\Coroutine\Channel;
use Swoole\Http\Request;
use Swoole\Http\Response;
use Swoole\Http\Server;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

// before any of Ganesha's strategies is compiled: their time() then reads the VirtualClock
require dirname(__DIR__, 2) . '/Support/virtual_clock_functions.php';
require dirname(__DIR__, 2) . '/Support/Autoload.php';
$missing = Autoload::register(true);
if ($missing !== null) {
    fwrite(STDERR, $missing . PHP_EOL);
    exit(3);
}
if ($argc !== 5 || !in_array($argv[3], ['on', 'off'], true)) {
    fwrite(STDERR, "usage: php server.php PORT WORKERS on|off DIR\n");
    exit(2);
}
[, $port, $workers, $hooks, $dir] = $argv;

set_error_handler(static function (int $severity, string $message, string $file, int $line): bool {
    throw new ErrorException($message, 0, $severity, $file, $line);
});

/** A query parameter, an integer; $default when absent (null: required). */
$int = static function (Request $request, string $name, ?int $default = null): int {
    $value = $request->get[$name] ?? null;
    if ($value === null && $default !== null) {
        return $default;
    }
    if (!is_string($value) || preg_match('/^-?\d+$/', $value) !== 1) {
        throw new InvalidArgumentException("query parameter {$name} is required, an integer");
    }

    return (int) $value;
};

/**
 * With barrier and parties in the query: waits (bounded) until `parties` requests have reached
 * this point, each marking its arrival with a file named by its worker's pid and its coroutine.
 * Coroutine::sleep() yields whatever the hooks, so the requests a worker holds all arrive.
 */
$barrier = static function (Request $request) use ($int, $dir): void {
    $barrier = $request->get['barrier'] ?? null;
    if ($barrier === null) {
        return;
    }
    if (!is_string($barrier) || preg_match('/^[0-9a-f]+$/', $barrier) !== 1) {
        throw new InvalidArgumentException('barrier: a hex name');
    }
    $parties = $int($request, 'parties');
    $path = "{$dir}/barrier-{$barrier}";
    touch($path . '/' . getmypid() . '.' . Coroutine::getCid());
    $deadline = microtime(true) + 10.0;
    while (($arrived = count(scandir($path)) - 2) < $parties) {
        if (microtime(true) > $deadline) {
            throw new RuntimeException("barrier: {$arrived} of {$parties} requests arrived in 10 s");
        }
        Coroutine::sleep(0.002);
    }
};

$serve = static function (Request $request, Server $server) use ($int, $barrier): array {
    $now = isset($request->get['now']) ? $int($request, 'now') : null;
    $now === null ? VirtualClock::reset() : VirtualClock::freeze($now);
    $adapter = new SlidingTimeWindowShm(null, $now === null ? null : VirtualClock::callable());
    $ganesha = Builder::withRateStrategy()
        ->adapter($adapter)
        ->timeWindow($int($request, 'window', 60))
        ->failureRateThreshold($int($request, 'threshold', 50))
        ->minimumRequests($int($request, 'minimum', 10))
        ->intervalToHalfOpen($int($request, 'interval', 600))
        ->build();
    $events = [];
    $ganesha->subscribe(static function (string $event, string $service, string $message) use (&$events): void {
        $events[] = [$event, $service, $message];
    });
    $service = (string) ($request->get['service'] ?? 'ping');
    $barrier($request);

    $answer = [];
    switch ($request->get['op'] ?? '') {
        case 'ping':
            break;
        case 'failure':
            $ganesha->failure($service);
            break;
        case 'success':
            $ganesha->success($service);
            break;
        case 'available':
            $answer['available'] = $ganesha->isAvailable($service);
            break;
        case 'snapshot': // read-only: the service's figures, or null when it has none
            $answer['snapshot'] = $adapter->snapshot()[$service] ?? null;
            break;
        case 'coroutines':
            // `coroutines` coroutines each report `times` failures, with a usleep() between two:
            // hooked, it yields, and the coroutines interleave (in_flight says how many were
            // under way at once); unhooked, it blocks, and each runs to its end in turn
            $coroutines = $int($request, 'coroutines');
            $times = $int($request, 'times');
            $done = new Channel($coroutines);
            $inFlight = $maxInFlight = 0;
            for ($i = 0; $i < $coroutines; ++$i) {
                Coroutine::create(static function () use ($ganesha, $service, $times, $done, &$inFlight, &$maxInFlight): void {
                    $maxInFlight = max($maxInFlight, ++$inFlight);
                    try {
                        for ($j = 0; $j < $times; ++$j) {
                            $ganesha->failure($service);
                            usleep(200);
                        }
                    } finally {
                        --$inFlight;
                        $done->push(true);
                    }
                });
            }
            for ($i = 0; $i < $coroutines; ++$i) {
                $done->pop(30.0) === true || throw new RuntimeException("coroutine {$i} of {$coroutines} did not end in 30 s");
            }
            $answer['in_flight'] = $maxInFlight;
            break;
        default:
            throw new InvalidArgumentException('unknown op');
    }

    return [
        'pid' => getmypid(),
        'cid' => Coroutine::getCid(),
        'worker_id' => $server->getWorkerId(),
        'manager' => $server->manager_pid,
        'hooks' => Swoole\Runtime::getHookFlags(),
        'time' => VirtualClock::now(),
    ] + $answer + ['events' => $events];
};

// every hook but curl's: the curl extension is not loaded (php -n), and Swoole would warn of it
Swoole\Runtime::enableCoroutine($hooks === 'on' ? SWOOLE_HOOK_ALL & ~SWOOLE_HOOK_CURL : 0);
// Ganesha's classes loaded in the master, before the fork: the workers' requests then read no
// class file (a file read is a yield when hooked)
Builder::withRateStrategy()->adapter(new SlidingTimeWindowShm())->timeWindow(60)->failureRateThreshold(50)
    ->minimumRequests(10)->intervalToHalfOpen(600)->build();

$server = new Server('127.0.0.1', (int) $port, SWOOLE_PROCESS);
$server->set([
    'worker_num' => (int) $workers,
    'reactor_num' => 2,
    // round robin: requests in sequence go to every worker in turn
    'dispatch_mode' => 1,
    'backlog' => 512,
    'enable_coroutine' => true,
    'max_request' => 0,
    'max_wait_time' => 2,
    'pid_file' => $dir . '/swoole.pid',
    'log_file' => $dir . '/swoole.log',
    'log_level' => SWOOLE_LOG_NOTICE,
]);
$server->on('request', static function (Request $request, Response $response) use ($serve, $server): void {
    try {
        $body = json_encode($serve($request, $server), JSON_THROW_ON_ERROR);
        $response->header('Content-Type', 'application/json');
        $response->end($body);
    } catch (Throwable $e) {
        $response->status(500);
        $response->header('Content-Type', 'text/plain');
        $response->end('worker ' . getmypid() . ': ' . $e);
    }
});
$server->start();
