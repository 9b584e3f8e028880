<?php

/*
 * The adapter's native class through a duck-typed context (tests/Support/TestAdapter), without
 * Ganesha: what the fpm suite checks runs whether Ganesha is installed or not, and a full store
 * throws RuntimeException, as in an application without Ganesha.
 *
 * Query: op (below), window (time window, default 600 s, so that nothing a test counts leaves
 * it), interval (to half-open; default: never), now (a fixed time for the adapter's clock;
 * default: the system's), catch=1 (report what the operation threw instead of a 500), and the
 * barrier's parameters (FpmServer::barrier()).
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Fpm\FpmScript;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeConfiguration;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

require dirname(__DIR__, 2) . '/Support/Autoload.php';
Autoload::register(false);
FpmScript::boot();

$now = FpmScript::optionalInt('now');
$adapter = TestAdapter::forWindow(
    FpmScript::int('window', 600),
    null,
    null,
    FpmScript::int('interval', FakeConfiguration::NEVER_HALF_OPEN),
    $now === null ? null : static fn (): int => $now,
);
FpmScript::barrier();

$answer = [];
switch (FpmScript::string('op')) {
    case 'increment': // key, times (default 1)
        $key = FpmScript::string('key');
        $times = FpmScript::int('times', 1);
        $answer['error'] = FpmScript::caught(static function () use ($adapter, $key, $times): void {
            for ($i = 0; $i < $times; ++$i) {
                $adapter->increment($key);
            }
        });
        break;
    case 'load': // keys[], statuses[]: counts and statuses
        foreach (FpmScript::strings('keys') as $key) {
            $answer['counts'][$key] = $adapter->load($key);
        }
        foreach (FpmScript::strings('statuses') as $key) {
            $answer['statuses'][$key] = $adapter->loadStatus($key);
        }
        break;
    case 'save_status': // key, status
        $key = FpmScript::string('key');
        $status = FpmScript::int('status');
        $answer['error'] = FpmScript::caught(static fn () => $adapter->saveStatus($key, $status));
        break;
    case 'failure': // service: what Ganesha's Rate strategy records on a failure
        $key = 'ganesha_' . FpmScript::string('service') . '_failure';
        $adapter->saveLastFailureTime($key, $now ?? time());
        $adapter->increment($key);
        break;
    case 'save_last_failure_time': // key, time
        $adapter->saveLastFailureTime(FpmScript::string('key'), FpmScript::int('time'));
        break;
    case 'claim': // key: loadLastFailureTime(), which claims the half-open trial when one is due
        $answer['last_failure_time'] = $adapter->loadLastFailureTime(FpmScript::string('key'));
        break;
    case 'fill': // service, n, status (default n): n successes, 2n failures, 3n rejections and the status, Ganesha's keys for the service
        $service = FpmScript::string('service');
        $n = FpmScript::int('n');
        $status = FpmScript::int('status', $n);
        $answer['error'] = FpmScript::caught(static function () use ($adapter, $service, $n, $status): void {
            foreach (['success' => 1, 'failure' => 2, 'rejection' => 3] as $suffix => $factor) {
                for ($i = 0; $i < $n * $factor; ++$i) {
                    $adapter->increment("ganesha_{$service}_{$suffix}");
                }
            }
            $adapter->saveStatus("ganesha_{$service}_status", $status);
        });
        break;
    case 'loop': // key, n, sleep_us, progress: increments, each followed by "<pid> <done>" written to the progress file
        $key = FpmScript::string('key');
        $progress = FpmScript::string('progress');
        $sleep = FpmScript::int('sleep_us');
        $deadline = microtime(true) + 20.0; // ends by itself if the test never kills it
        for ($done = 1; $done <= FpmScript::int('n') && microtime(true) < $deadline; ++$done) {
            $adapter->increment($key);
            file_put_contents($progress . '.tmp', getmypid() . ' ' . $done);
            rename($progress . '.tmp', $progress);
            usleep($sleep);
        }
        $answer['done'] = $done - 1;
        break;
    case 'info':
        $answer['info'] = ganesha_shm_info();
        break;
    default:
        throw new InvalidArgumentException('unknown op');
}

FpmScript::respond($answer);
