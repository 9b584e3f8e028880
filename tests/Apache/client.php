<?php

/*
 * A load client of the apache suite (ApacheServer::load(), LoadClients), run as
 * `php -n client.php <job>`: sends GET requests to Apache one after the other over plain HTTP
 * (HttpClient), until it has sent `requests` of them, `seconds` have passed, or the file `stop`
 * exists, whichever comes first, and prints as JSON what it counted (LoadClient::run()):
 * requests sent, answered with a 200 and a body, failed (with the first few errors), and how
 * many each child pid served (the scripts answer JSON with a "pid").
 *
 * <job>: JSON {port, path, query, requests: int|null, seconds: float|null, stop: string|null}.
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Apache\HttpClient;
use Zeusi\GaneshaShmAdapter\Tests\Support\LoadClient;

require __DIR__ . '/HttpClient.php';
require dirname(__DIR__) . '/Support/LoadClient.php';

$job = json_decode($argv[1] ?? '', true, 512, JSON_THROW_ON_ERROR);
$get = static fn (): array => HttpClient::get($job['port'], $job['path'], $job['query']);

echo json_encode(LoadClient::run($get, $job['requests'], $job['seconds'], $job['stop']), JSON_THROW_ON_ERROR);
