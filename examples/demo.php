<?php

/**
 * A Ganesha circuit over SlidingTimeWindowShm, shared by two forked workers: the backend fails
 * for its first seconds, the circuit trips after minimumRequests failures counted across both
 * workers, rejects, lets one trial through per intervalToHalfOpen, and closes once the failures
 * have left the time window. Every request and event is printed as it happens.
 *
 * Run with: php -d extension=target/release/libganesha_shm.so examples/demo.php
 */

declare(strict_types=1);

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

$ganeshaMissing = require __DIR__ . '/../tests/autoload.php';
if ($ganeshaMissing !== null) {
    fwrite(STDERR, "demo: {$ganeshaMissing}\n");
    exit(1);
}

const SERVICE = 'payments';
const BACKEND_DOWN_FOR = 7.0;     // seconds after the start during which the backend fails
const RUN_FOR = 13.0;             // seconds the workers send requests
const REQUEST_EVERY = 0.5;        // seconds between two requests of one worker

$start = microtime(true);
$say = static function (string $line) use ($start): void {
    printf("[+%5.2fs] pid %d  %s\n", microtime(true) - $start, getmypid(), $line);
};

// Built before forking, as php-fpm workers each build theirs: the circuit itself lives in the
// segment the extension created at startup, which both workers share.
$ganesha = Builder::withRateStrategy()
    ->adapter(new SlidingTimeWindowShm())
    ->timeWindow(4)
    ->failureRateThreshold(50)
    ->minimumRequests(4)
    ->intervalToHalfOpen(2)
    ->build();
$ganesha->subscribe(static function (string $event, string $service, string $message) use ($say): void {
    $say(sprintf('EVENT %s (%s)%s', strtoupper($event), $service, $message === '' ? '' : ": {$message}"));
});
$ganesha->reset();

$say(sprintf('backend down for the first %.0f s; timeWindow 4 s, threshold 50%%, minimumRequests 4, intervalToHalfOpen 2 s', BACKEND_DOWN_FOR));

$workers = [];
foreach ([0.0, REQUEST_EVERY / 2] as $offset) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        usleep((int) ($offset * 1e6));
        while (($elapsed = microtime(true) - $start) < RUN_FOR) {
            if (!$ganesha->isAvailable(SERVICE)) {
                $say('rejected by the open circuit');
            } elseif ($elapsed < BACKEND_DOWN_FOR) {
                $ganesha->failure(SERVICE);
                $say('request sent: backend FAILED');
            } else {
                $ganesha->success(SERVICE);
                $say('request sent: backend ok');
            }
            usleep((int) (REQUEST_EVERY * 1e6));
        }
        exit(0);
    }
    $workers[] = $pid;
}
foreach ($workers as $pid) {
    pcntl_waitpid($pid, $status);
}
$info = ganesha_shm_info();
$say(sprintf(
    'done: %d counter and %d status slots in use, %d bytes of shared memory per service',
    $info['counter_slots_used'],
    $info['status_slots_used'],
    $info['bytes_per_service'],
));
