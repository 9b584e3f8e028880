<?php

/*
 * A load client of the fpm suite (FpmServer::clients(), LoadClients), run as
 * `php -n client.php <job>`: sends GET requests to php-fpm one after the other through
 * cgi-fcgi (FastCgiClient), a fixed number of them or as many as it can for a number of
 * seconds, and prints as JSON what it counted (LoadClient::run()): requests sent, answered with
 * a 200 and a body, failed (with the first few errors), and how many each worker pid served
 * (the scripts answer JSON with a "pid").
 *
 * <job>: JSON {port, script, query, requests: int|null, seconds: float|null, stop: string|null}.
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Fpm\FastCgiClient;
use Zeusi\GaneshaShmAdapter\Tests\Support\LoadClient;

require __DIR__ . '/FastCgiClient.php';
require dirname(__DIR__) . '/Support/LoadClient.php';

$job = json_decode($argv[1] ?? '', true, 512, JSON_THROW_ON_ERROR);
$get = static fn (): array => FastCgiClient::get($job['port'], $job['script'], $job['query']);

echo json_encode(LoadClient::run($get, $job['requests'], $job['seconds'], $job['stop']), JSON_THROW_ON_ERROR);
