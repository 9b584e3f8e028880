<?php

/*
 * What tests/Zts/harness.c runs for each request on its threads: a script of the fpm suite
 * (tests/Fpm/www/<script>.php: the real Ganesha over SlidingTimeWindowShm, or the adapter's
 * native class), given the query of the harness's last argument as its $_GET.
 *
 * $argv: [this script, thread, request, wave, waves, query]. The query's `op` is every wave's,
 * but the last wave's is `last` when given, at the time `last_now` when given, and
 * `last_barrier=1` holds the last wave's threads at harness_barrier() before it, so that they ask
 * at the same instant. The answer is one line
 * of JSON, written at once (so the lines of concurrent threads do not mix): the script's answer
 * with the thread, the request and the wave. What the script threw goes to standard error and
 * fails the request (exit status 1).
 */

declare(strict_types=1);

[, $thread, $request, $wave, $waves, $query] = $argv;
\parse_str($query, $_GET);
if ((int) $wave === (int) $waves - 1 && isset($_GET['last'])) {
    $_GET['op'] = $_GET['last'];
    if (isset($_GET['last_now'])) {
        $_GET['now'] = $_GET['last_now'];
    }
    if (isset($_GET['last_barrier'])) {
        $_GET['barrier'] = 'harness';
    }
}
\ob_start();
try {
    require \dirname(__DIR__, 2) . '/Fpm/www/' . \basename((string) $_GET['script']) . '.php';
} catch (\Throwable $e) {
    \ob_end_clean();
    \file_put_contents('php://stderr', "thread {$thread}, request {$request}: {$e}\n");
    exit(1);
}
$answer = \json_decode((string) \ob_get_clean(), true, 512, \JSON_THROW_ON_ERROR);
echo \json_encode(['thread' => (int) $thread, 'request' => (int) $request, 'wave' => (int) $wave] + $answer, \JSON_THROW_ON_ERROR) . "\n";
