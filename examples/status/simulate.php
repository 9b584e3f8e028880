<?php

/**
 * DEMO HELPER, NOT FOR PRODUCTION: sends requests of a made-up service through Ganesha, so that
 * the status page has circuits to show. Anyone who can reach it can open your circuits, so it
 * answers 403 unless the server was started with the environment variable GANESHA_STATUS_DEMO=1
 * (`php -S` passes its environment to the scripts; php-fpm clears it by default). Delete it
 * when copying this directory into an application.
 *
 *   simulate.php?service=payments&outcome=failure&count=3
 *
 * service  the service name (letters, digits, . _ : -; at most 64)
 * outcome  failure | success: for each request admitted by $ganesha->isAvailable(), report
 *          that outcome with $ganesha->failure() / success(), as an application does after
 *          calling the service; none: only ask isAvailable() (takes a due half-open trial and
 *          reports nothing)
 * count    requests to send, 1 to 100 (default 1)
 *
 * Answers JSON: the pid of the worker that served it, how many requests were admitted and
 * rejected, and the service's snapshot afterwards.
 */

declare(strict_types=1);

header('Content-Type: application/json');
header('Cache-Control: no-store');

$respond = static function (int $status, array $body): void {
    http_response_code($status);
    echo json_encode($body, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), "\n";
};

if (getenv('GANESHA_STATUS_DEMO') !== '1') {
    $respond(403, ['error' => 'simulate.php is a demo helper: start the server with GANESHA_STATUS_DEMO=1 to enable it']);

    return;
}

$service = (string) ($_REQUEST['service'] ?? '');
$outcome = (string) ($_REQUEST['outcome'] ?? '');
$count = filter_var($_REQUEST['count'] ?? 1, FILTER_VALIDATE_INT, ['options' => ['min_range' => 1, 'max_range' => 100]]);
if (preg_match('/\A[A-Za-z0-9._:-]{1,64}\z/', $service) !== 1
    || !in_array($outcome, ['failure', 'success', 'none'], true)
    || $count === false
) {
    $respond(400, ['error' => 'usage: simulate.php?service=<name: [A-Za-z0-9._:-]{1,64}>&outcome=failure|success|none[&count=1..100]']);

    return;
}

try {
    ['ganesha' => $ganesha, 'adapter' => $adapter] = require __DIR__ . '/ganesha.php';
    $admitted = 0;
    for ($i = 0; $i < $count; $i++) {
        if (!$ganesha->isAvailable($service)) {
            continue;   // rejected by the open circuit: the application would not call the service
        }
        $admitted++;
        if ($outcome === 'failure') {
            $ganesha->failure($service);
        } elseif ($outcome === 'success') {
            $ganesha->success($service);
        }
    }
    $respond(200, [
        'service' => $service,
        'outcome' => $outcome,
        'pid' => getmypid(),
        'admitted' => $admitted,
        'rejected' => $count - $admitted,
        'snapshot' => $adapter->snapshot()[$service] ?? null,
    ]);
} catch (Throwable $e) {
    $respond(500, ['error' => $e->getMessage()]);
}
