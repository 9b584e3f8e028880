<?php

/**
 * One host of the fleet tests: a PHP process with the extension in fleet mode (its own
 * segment file), running Ganesha's Rate strategy over SlidingTimeWindowShm. It reads one JSON
 * command per line on stdin and answers one JSON line on stdout:
 *   {"op":"record","service":S,"failures":F,"successes":N}  F failures and N successes
 *        reported to Ganesha; answers the slowest report in ms
 *   {"op":"available","service":S}   isAvailable(), and how long it took
 *   {"op":"trial","service":S,"ok":B}  isAvailable(), then success() or failure() if admitted
 *   {"op":"spray","prefix":P,"count":N}  one failure of each of N services named P0, P1, …;
 *        answers how many Ganesha took without an exception
 *   {"op":"reset","service":S}  the adapter's resetService()
 *   {"op":"reset_all"}  the adapter's reset()
 *   {"op":"snapshot"}  the adapter's snapshot(), ganesha_shm_info() and hrtime in ms
 *   {"op":"metrics"}   the adapter's metrics()
 *   {"op":"sockets"}   the sockets this process has open
 * Argument: the Ganesha settings as JSON (timeWindow, failureRateThreshold, minimumRequests,
 * intervalToHalfOpen; with "lazy": true, Ganesha is built at the first command that uses it, as a
 * php-fpm worker builds it at its first request, and the snapshot is empty until then).
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
$ganesha = null;
$events = [];
$build = static function () use ($adapter, $settings, &$ganesha, &$events): \Ackintosh\Ganesha {
    if ($ganesha === null) {
        $ganesha = \Ackintosh\Ganesha\Builder::withRateStrategy()
            ->adapter($adapter)
            ->timeWindow($settings['timeWindow'])
            ->failureRateThreshold($settings['failureRateThreshold'])
            ->minimumRequests($settings['minimumRequests'])
            ->intervalToHalfOpen($settings['intervalToHalfOpen'])
            ->build();
        $ganesha->subscribe(function (string $event, string $service) use (&$events): void {
            $events[] = [$event, $service];
        });
    }

    return $ganesha;
};
if (!($settings['lazy'] ?? false)) {
    $build();
}

$timed = static function (callable $call): array {
    $started = hrtime(true);
    $result = $call();

    return [$result, (hrtime(true) - $started) / 1e6];
};

while (($line = fgets(STDIN)) !== false) {
    $command = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
    $service = $command['service'] ?? '';
    if (!in_array($command['op'], ['snapshot', 'events', 'sockets'], true)) {
        $build();
    }
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
        'spray' => (function () use ($ganesha, $command): array {
            $taken = 0;
            for ($i = 0; $i < $command['count']; ++$i) {
                try {
                    $ganesha->failure($command['prefix'] . $i);
                    ++$taken;
                } catch (\Throwable) {
                }
            }

            return ['taken' => $taken];
        })(),
        'reset' => (function () use ($adapter, $service): array {
            $adapter->resetService($service);

            return ['reset' => true];
        })(),
        'reset_all' => (function () use ($adapter): array {
            $adapter->reset();

            return ['reset' => true];
        })(),
        'snapshot' => ['snapshot' => $ganesha === null ? [] : $adapter->snapshot(), 'info' => ganesha_shm_info(), 'now_ms' => intdiv(hrtime(true), 1_000_000)],
        'metrics' => ['metrics' => $adapter->metrics()],
        'events' => ['events' => $events],
        'sockets' => ['sockets' => count(array_filter(
            scandir('/proc/self/fd') ?: [],
            fn (string $fd) => str_starts_with((string) @readlink("/proc/self/fd/{$fd}"), 'socket:')
        ))],
    };
    // Service names are bytes: one a segment's writer garbled is answered, not an error.
    echo json_encode($reply, JSON_THROW_ON_ERROR | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
}
