<?php

/*
 * An application's HTTP call through Ganesha's middleware for its client, as Ganesha's README
 * sets each up, served by php-fpm: the real Ganesha, Builder::withRateStrategy() over
 * SlidingTimeWindowShm, built anew by every request, on a fixed time (the tests' VirtualClock,
 * for both Ganesha and the adapter) so that the interval to half-open passes when the test says.
 *
 *  - client=guzzle:  GuzzleMiddleware pushed on HandlerStack::create()'s stack, with the default
 *                    service name extractor and ServerErrorDetector (5xx are failures);
 *  - client=symfony: GaneshaHttpClient around HttpClient::create()'s client (NativeHttpClient
 *                    without the curl extension), with the default service
 *                    name extractor and Ganesha's RestFailureDetector (5xx are failures).
 *
 * Query: client, op (call: GET url; snapshot: the adapter's snapshot() of every service, read
 * only), url, now, threshold, minimum, interval (the Builder's failureRateThreshold,
 * minimumRequests, intervalToHalfOpen; time window 60 s), and the barrier's parameters
 * (FpmServer::barrier()), met just before the call. A call answers the status the client got,
 * or the service a RejectedException named; with the events Ganesha notified.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Exception\RejectedException;
use Ackintosh\Ganesha\GaneshaHttpClient;
use Ackintosh\Ganesha\GuzzleMiddleware;
use Ackintosh\Ganesha\HttpClient\RestFailureDetector;
use GuzzleHttp\Client;
use GuzzleHttp\Exception\BadResponseException;
use GuzzleHttp\HandlerStack;
use Symfony\Component\HttpClient\HttpClient;
use Symfony\Component\HttpClient\NativeHttpClient;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Fpm\FpmScript;
use Zeusi\GaneshaShmAdapter\Tests\Middleware\HttpClients;
use Zeusi\GaneshaShmAdapter\Tests\Middleware\ServerErrorDetector;
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
$client = FpmScript::string('client');
HttpClients::load($client);

VirtualClock::freeze(FpmScript::int('now'));
$adapter = new SlidingTimeWindowShm(null, VirtualClock::callable());
$ganesha = Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow(60)
    ->failureRateThreshold(FpmScript::int('threshold'))
    ->minimumRequests(FpmScript::int('minimum'))
    ->intervalToHalfOpen(FpmScript::int('interval'))
    ->build();
$events = [];
$ganesha->subscribe(static function (string $event, string $service) use (&$events): void {
    $events[] = [$event, $service];
});

if (FpmScript::string('op') === 'snapshot') {
    $services = [];
    foreach ($adapter->snapshot() as $row) {
        $services[$row['service']] = [$row['failures'], $row['successes'], $row['rejections'], $row['status']];
    }
    FpmScript::respond(['services' => $services]);

    return;
}

$url = FpmScript::string('url');
$call = match ($client) {
    HttpClients::GUZZLE => static function () use ($ganesha, $url): int {
        $stack = HandlerStack::create();
        $stack->push(new GuzzleMiddleware($ganesha, null, new ServerErrorDetector()));
        try {
            return (new Client(['handler' => $stack]))->get($url)->getStatusCode();
        } catch (BadResponseException $e) { // http_errors: a 4xx or 5xx, after the middleware saw it
            return $e->getResponse()->getStatusCode();
        }
    },
    HttpClients::SYMFONY => static function () use ($ganesha, $url): int {
        // the pool runs `php -n`, without the curl extension: HttpClient::create() would then pick
        // NativeHttpClient with a notice saying to install curl, which fails the request here
        $http = \extension_loaded('curl') ? HttpClient::create() : new NativeHttpClient();

        return (new GaneshaHttpClient($http, $ganesha, null, new RestFailureDetector()))->request('GET', $url)->getStatusCode();
    },
};
FpmScript::barrier();
try {
    $answer = ['status' => $call()];
} catch (RejectedException $e) {
    $answer = ['rejected' => $e->serviceName()];
}
FpmScript::respond($answer + ['events' => $events]);
