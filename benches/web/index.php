<?php

/*
 * The endpoint of benches/web.sh, served by php-fpm behind nginx. Every request builds
 * Ganesha anew, as an application does, then makes one isAvailable() and one success() on one
 * service.
 *
 * Query:
 *   adapter   plain (no Ganesha), null (Ganesha over the do-nothing adapter), shm
 *             (SlidingTimeWindowShm), apcu (Ganesha's Apcu), redis (Ganesha's Redis, phpredis
 *             with a persistent connection to BENCH_REDIS_PORT on 127.0.0.1)
 *   services  how many services the requests are spread over (default 1): each request picks
 *             one at random
 *   read      1: instead, answer the successes the adapter holds for the first service (the
 *             chaos soak's ledger)
 *
 * The answer is "counted" once success() has returned: the chaos soak counts these.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Storage\Adapter\Apcu;
use Ackintosh\Ganesha\Storage\Adapter\Redis as RedisAdapter;
use Zeusi\GaneshaShmAdapter\Benches\NullAdapter;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

header('Content-Type: text/plain');
$kind = (string) ($_GET['adapter'] ?? 'plain');
if ($kind === 'plain') {
    echo "counted\n";

    return;
}

$missing = require dirname(__DIR__, 2) . '/tests/autoload.php';
if ($missing !== null) {
    http_response_code(500);
    echo $missing, "\n";

    return;
}
// Each endpoint loads the one adapter class it uses, as an application's autoloader does: the
// do-nothing adapter's file is included only by its own endpoint, so that the others do not
// pay for a class they never use.
$adapter = match ($kind) {
    'null' => (static function (): NullAdapter {
        require_once dirname(__DIR__) . '/NullAdapter.php';

        return new NullAdapter();
    })(),
    'shm' => new SlidingTimeWindowShm(),
    'apcu' => new Apcu(),
    'redis' => (static function (): RedisAdapter {
        $redis = new \Redis();
        $redis->pconnect('127.0.0.1', (int) getenv('BENCH_REDIS_PORT'));

        return new RedisAdapter($redis);
    })(),
    default => null,
};
if ($adapter === null) {
    http_response_code(400);
    echo "adapter: plain, null, shm, apcu or redis\n";

    return;
}

// A window long enough that the chaos soak's successes are all still in it when it reads them.
$ganesha = Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow(3600)
    ->failureRateThreshold(50)
    ->minimumRequests(10)
    ->intervalToHalfOpen(5)
    ->build();

$services = max(1, (int) ($_GET['services'] ?? 1));
if (($_GET['read'] ?? '') === '1') {
    if (!$adapter instanceof SlidingTimeWindowShm) {
        http_response_code(400);
        echo "read: only the shm adapter\n";

        return;
    }
    $ganesha->isAvailable('service0');   // configures the adapter; one rejection at most, not a success
    echo $adapter->snapshot()['service0']['successes'] ?? 0, "\n";

    return;
}

$service = 'service' . ($services > 1 ? mt_rand(0, $services - 1) : 0);
if ($ganesha->isAvailable($service)) {
    $ganesha->success($service);
}
echo "counted\n";
