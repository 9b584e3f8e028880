<?php

/**
 * One host of the fleet tests: a PHP process with the extension in fleet mode (its own
 * segment file), running Ganesha's Rate strategy over SlidingTimeWindowShm. It reads one JSON
 * command per line on stdin and answers one JSON line on stdout:
 *   {"op":"record","service":S,"failures":F,"successes":N}  F failures and N successes
 *        reported to Ganesha; answers the slowest report in ms
 *   {"op":"available","service":S}   isAvailable(), and how long it took
 *   {"op":"trial","service":S,"ok":B}  isAvailable(), then success() or failure() if admitted
 *   {"op":"reset","service":S}  the adapter's resetService()
 *   {"op":"reset_all"}  the adapter's reset()
 *   {"op":"snapshot"}  the adapter's snapshot(), ganesha_shm_info() and hrtime in ms
 *   {"op":"sockets"}   the sockets this process has open
 * Argument: the Ganesha settings as JSON (timeWindow, failureRateThreshold, minimumRequests,
 * intervalToHalfOpen).
 */

declare(strict_types=1);

require $_SERVER['argv'][2];
$missing = \Zeusi\GaneshaShmAdapter\Tests\Support\Autoload::register(true);
if ($missing !== null) {
    fwrite(STDERR, $missing);
    exit(3);
}

$settings = json_decode($_SERVER['argv'][1], true, 8, JSON_THROW_ON_ERROR);
$adapter = new \Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm();
$ganesha = \Ackintosh\Ganesha\Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow($settings['timeWindow'])
    ->failureRateThreshold($settings['failureRateThreshold'])
    ->minimumRequests($settings['minimumRequests'])
    ->intervalToHalfOpen($settings['intervalToHalfOpen'])
    ->build();
$events = [];
$ganesha->subscribe(function (string $event, string $service) use (&$events): void {
    $events[] = [$event, $service];
});

$timed = static function (callable $call): array {
    $started = hrtime(true);
    $result = $call();

    return [$result, (hrtime(true) - $started) / 1e6];
};

while (($line = fgets(STDIN)) !== false) {
    $command = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
    $service = $command['service'] ?? '';
    $reply = match ($command['op']) {
        'record' => (function () use ($ganesha, $service, $command, $timed): array {
            $slowest = 0.0;
            foreach ([[false, $command['failures'] ?? 0], [true, $command['successes'] ?? 0]] as [$ok, $count]) {
                for ($i = 0; $i < $count; ++$i) {
                    [, $ms] = $timed(fn () => $ok ? $ganesha->success($service) : $ganesha->failure($service));
                    $slowest = max($slowest, $ms);
                }
            }

            return ['slowest_ms' => $slowest];
        })(),
        'available' => (function () use ($ganesha, $service, $timed): array {
            [$available, $ms] = $timed(fn () => $ganesha->isAvailable($service));

            return ['available' => $available, 'ms' => $ms];
        })(),
        'trial' => (function () use ($ganesha, $service, $command): array {
            $admitted = $ganesha->isAvailable($service);
            if ($admitted) {
                $command['ok'] ? $ganesha->success($service) : $ganesha->failure($service);
            }

            return ['admitted' => $admitted];
        })(),
        'reset' => (function () use ($adapter, $service): array {
            $adapter->resetService($service);

            return ['reset' => true];
        })(),
        'reset_all' => (function () use ($adapter): array {
            $adapter->reset();

            return ['reset' => true];
        })(),
        'snapshot' => ['snapshot' => $adapter->snapshot(), 'info' => ganesha_shm_info(), 'now_ms' => intdiv(hrtime(true), 1_000_000)],
        'events' => ['events' => $events],
        'sockets' => ['sockets' => count(array_filter(
            scandir('/proc/self/fd') ?: [],
            fn (string $fd) => str_starts_with((string) @readlink("/proc/self/fd/{$fd}"), 'socket:')
        ))],
    };
    echo json_encode($reply, JSON_THROW_ON_ERROR), "\n";
}
