<?php

/*
 * A circuit of the real Ganesha, Builder::withRateStrategy() over SlidingTimeWindowShm, built
 * anew by every request as an application does; fails with a 500 when Ganesha is not loadable
 * (the tests that use it are skipped then).
 *
 * Query: op (below), service, window, threshold, minimum, interval (the Builder's timeWindow,
 * failureRateThreshold, minimumRequests, intervalToHalfOpen), now (a fixed time for both
 * Ganesha and the adapter, through the tests' VirtualClock; default: the system's), and the
 * barrier's parameters (FpmServer::barrier()). The answer lists the events Ganesha notified.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Fpm\FpmScript;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

// before any of Ganesha's strategies is compiled: their time() then reads the VirtualClock
require dirname(__DIR__, 2) . '/Support/virtual_clock_functions.php';
require dirname(__DIR__, 2) . '/Support/Autoload.php';
$missing = Autoload::register(true);
FpmScript::boot();
if ($missing !== null) {
    throw new RuntimeException($missing);
}

$now = FpmScript::optionalInt('now');
if ($now !== null) {
    VirtualClock::freeze($now);
}
$adapter = new SlidingTimeWindowShm(null, $now === null ? null : VirtualClock::callable());
$ganesha = Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow(FpmScript::int('window', 60))
    ->failureRateThreshold(FpmScript::int('threshold', 50))
    ->minimumRequests(FpmScript::int('minimum', 10))
    ->intervalToHalfOpen(FpmScript::int('interval', 600))
    ->build();
$events = [];
$ganesha->subscribe(static function (string $event, string $service, string $message) use (&$events): void {
    $events[] = [$event, $service, $message];
});
$service = FpmScript::string('service');
FpmScript::barrier();

$answer = ['time' => VirtualClock::now()];
switch (FpmScript::string('op')) {
    case 'failure':
        $ganesha->failure($service);
        break;
    case 'success':
        $ganesha->success($service);
        break;
    case 'available':
        $answer['available'] = $ganesha->isAvailable($service);
        break;
    case 'trial': // isAvailable(), then success() when the request was let through
        $answer['available'] = $ganesha->isAvailable($service);
        if ($answer['available']) {
            $ganesha->success($service);
        }
        break;
    case 'snapshot': // read-only: the service's figures, or null when it has none
        $answer['snapshot'] = $adapter->snapshot()[$service] ?? null;
        break;
    case 'increment': // the adapter alone, as Ganesha calls it, on the service's failure key
        $answer['error'] = FpmScript::caught(static fn () => $adapter->increment("ganesha_{$service}_failure"));
        break;
    default:
        throw new InvalidArgumentException('unknown op');
}

FpmScript::respond($answer + ['events' => $events]);
