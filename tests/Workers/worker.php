<?php

/*
 * A worker of the workers suite, as RoadRunner runs one: a plain `php` process started on its
 * own (not forked from a PHP parent, so its PHP startup, and the extension's, is its own) that
 * boots the application once, then serves requests relayed over its pipes until its stdin
 * closes. Here the application is the real Ganesha, Builder::withRateStrategy() over
 * SlidingTimeWindowShm, built once with the settings given as JSON in the first argument.
 *
 * Protocol (line-delimited JSON, as RoadRunner's pipes relay carries frames): at startup one
 * line {"ready":true,"pid":P,"segment":S} (S: ganesha_shm_info()'s segment, 'anonymous' or the
 * path), then for each request line {"op":O,"service":N} one answer line with the pid and the
 * events Ganesha notified while serving it:
 *   failure, success   Ganesha's failure() / success()
 *   available          isAvailable()
 *   snapshot           the adapter's snapshot() of the service (failures, successes,
 *                      rejections, status), or null when this segment has nothing of it
 * Any error ends the worker with its message on stderr: the supervisor reports it.
 */

declare(strict_types=1);

use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;

require dirname(__DIR__) . '/Support/Autoload.php';
set_error_handler(static function (int $severity, string $message, string $file, int $line): bool {
    throw new ErrorException($message, 0, $severity, $file, $line);
});
$missing = Autoload::register(true);
if ($missing !== null) {
    fwrite(STDERR, $missing . PHP_EOL);
    exit(3);
}

$settings = json_decode($argv[1], true, 8, JSON_THROW_ON_ERROR);
$adapter = new SlidingTimeWindowShm();
$ganesha = Builder::withRateStrategy()
    ->adapter($adapter)
    ->timeWindow($settings['timeWindow'])
    ->failureRateThreshold($settings['failureRateThreshold'])
    ->minimumRequests($settings['minimumRequests'])
    ->intervalToHalfOpen($settings['intervalToHalfOpen'])
    ->build();
$events = [];
$ganesha->subscribe(static function (string $event, string $service) use (&$events): void {
    $events[] = [$event, $service];
});

$answer = static function (array $data): void {
    echo json_encode(['pid' => getmypid()] + $data, JSON_THROW_ON_ERROR), "\n";
};
$answer(['ready' => true, 'segment' => ganesha_shm_info()['segment']]);

while (($line = fgets(STDIN)) !== false) {
    $request = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
    $service = $request['service'];
    $events = [];
    $data = [];
    switch ($request['op']) {
        case 'failure':
            $ganesha->failure($service);
            break;
        case 'success':
            $ganesha->success($service);
            break;
        case 'available':
            $data['available'] = $ganesha->isAvailable($service);
            break;
        case 'snapshot':
            $row = $adapter->snapshot()[$service] ?? null;
            $data['snapshot'] = $row === null ? null : array_intersect_key($row, array_flip(['failures', 'successes', 'rejections', 'status']));
            break;
        default:
            throw new InvalidArgumentException("unknown op {$request['op']}");
    }
    $answer($data + ['events' => $events]);
}
