<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * The loop of a load client of the web suites (tests/Fpm/client.php, tests/Apache/client.php,
 * started by LoadClients), each of which gives it the one thing it does its own way: sending a
 * request, through cgi-fcgi or over HTTP.
 *
 * No dependency on other classes: the load clients run as `php -n` processes, which require this
 * file and their own client alone.
 */
final class LoadClient
{
    /** How many errors a client keeps, the first ones. */
    private const ERRORS = 3;

    /**
     * Sends requests with $get one after the other until $requests of them were sent,
     * $seconds have passed, or the file $stop exists, whichever comes first (null: no such
     * bound), and returns what it counted (LoadResults): requests sent, answered with a 200 and
     * a body, failed (with the first few errors), and how many each server process served (the
     * scripts answer JSON with a "pid").
     *
     * @param callable(): array{status: int, headers: array<string, string>, body: string, error: string} $get
     *     sends one request and returns its answer, error '' for a 200 with a body
     * @return array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}
     */
    public static function run(callable $get, ?int $requests, ?float $seconds, ?string $stop = null): array
    {
        $until = $seconds === null ? null : \microtime(true) + $seconds;
        $result = ['sent' => 0, 'ok' => 0, 'failed' => 0, 'pids' => [], 'errors' => [], 'seconds' => 0.0];
        $start = \microtime(true);

        while (($requests === null || $result['sent'] < $requests) && ($until === null || \microtime(true) < $until)) {
            if ($stop !== null) {
                \clearstatcache(false, $stop);
                if (\file_exists($stop)) {
                    break;
                }
            }
            $answer = $get();
            ++$result['sent'];
            $pid = $answer['error'] === '' ? (\json_decode($answer['body'], true)['pid'] ?? null) : null;
            if (!\is_int($pid)) {
                ++$result['failed'];
                if (\count($result['errors']) < self::ERRORS) {
                    $result['errors'][] = $answer['error'] !== '' ? $answer['error'] : 'no pid in the answer: ' . \substr($answer['body'], 0, 500);
                }
                continue;
            }
            ++$result['ok'];
            $result['pids'][$pid] = ($result['pids'][$pid] ?? 0) + 1;
        }
        $result['seconds'] = \microtime(true) - $start;

        return $result;
    }
}
