<?php

/*
 * A load client of the apache suite (LoadClients), run as `php -n client.php <job>`: sends
 * GET requests to Apache one after the other over plain HTTP (HttpClient), until it has sent
 * `requests` of them, `seconds` have passed, or the file `stop` exists, whichever comes first,
 * and prints as JSON what it counted: requests sent, answered with a 200 and a body, failed
 * (with the first few errors), and how many each child pid served (the scripts answer JSON
 * with a "pid").
 *
 * <job>: JSON {port, path, query, requests: int, seconds: float, stop: string|null}.
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Apache\HttpClient;

require __DIR__ . '/HttpClient.php';

$job = json_decode($argv[1] ?? '', true, 512, JSON_THROW_ON_ERROR);
$until = microtime(true) + $job['seconds'];
$stop = $job['stop'];
$result = ['sent' => 0, 'ok' => 0, 'failed' => 0, 'pids' => [], 'errors' => [], 'seconds' => 0.0];
$start = microtime(true);

while ($result['sent'] < $job['requests'] && microtime(true) < $until) {
    if ($stop !== null) {
        clearstatcache(false, $stop);
        if (file_exists($stop)) {
            break;
        }
    }
    $answer = HttpClient::get($job['port'], $job['path'], $job['query']);
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
