<?php

/*
 * A load client of the fpm suite (FpmServer::clients()), run as `php -n client.php <job>`:
 * sends GET requests to php-fpm one after the other through cgi-fcgi, a fixed number of them
 * or as many as it can for a number of seconds, and prints as JSON what it counted: requests
 * sent, answered with a 200 and a body, failed (with the first few errors), and how many
 * each worker pid served (the scripts answer JSON with a "pid").
 *
 * <job>: JSON {port, script, query, requests: int|null, seconds: float|null}.
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Fpm\FastCgiClient;

require __DIR__ . '/FastCgiClient.php';

$job = json_decode($argv[1] ?? '', true, 512, JSON_THROW_ON_ERROR);
$requests = $job['requests'];
$until = $job['seconds'] === null ? null : microtime(true) + $job['seconds'];
$result = ['sent' => 0, 'ok' => 0, 'failed' => 0, 'pids' => [], 'errors' => [], 'seconds' => 0.0];
$start = microtime(true);

while (($requests === null || $result['sent'] < $requests) && ($until === null || microtime(true) < $until)) {
    $answer = FastCgiClient::get($job['port'], $job['script'], $job['query']);
    ++$result['sent'];
    $pid = $answer['error'] === '' ? (json_decode($answer['body'], true)['pid'] ?? null) : null;
    if (!is_int($pid)) {
        ++$result['failed'];
        if (count($result['errors']) < 3) {
            $result['errors'][] = $answer['error'] !== '' ? $answer['error'] : 'no pid in the answer: ' . substr($answer['body'], 0, 500);
        }
        continue;
    }
    ++$result['ok'];
    $result['pids'][$pid] = ($result['pids'][$pid] ?? 0) + 1;
}
$result['seconds'] = microtime(true) - $start;

echo json_encode($result, JSON_THROW_ON_ERROR);
