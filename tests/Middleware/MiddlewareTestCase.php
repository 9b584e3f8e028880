<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Fpm\FpmServer;
use Zeusi\GaneshaShmAdapter\Tests\Fpm\FpmTestCase;

/**
 * Base of the middleware suite: Ganesha in front of an application's HTTP calls, through its
 * middleware for one client (client()), under php-fpm (a pool of the test's own, FpmTestCase),
 * calling an upstream on loopback (Upstream) that fails and recovers when the test says.
 *
 * The circuit is the one the middleware names: Ganesha's default service name extractors (for
 * Guzzle and for Symfony HttpClient alike) take the URL's host alone, not its port, so every
 * call to http://127.0.0.1:PORT/ counts under the service "127.0.0.1". Each test's pool has a
 * segment of its own, so that service is this test's.
 *
 * Skipped, with one line saying what to install, when php-fpm, cgi-fcgi, Ganesha or the client
 * library is missing.
 */
abstract class MiddlewareTestCase extends FpmTestCase
{
    /** The service the default extractors derive from http://127.0.0.1:PORT/… */
    private const SERVICE = '127.0.0.1';

    /** Ganesha's settings: tripped by 4 failures; one success among 5 failures (83 %) closes it. */
    private const CIRCUIT = ['threshold' => 90, 'minimum' => 4, 'interval' => 2];

    /** HttpClients::GUZZLE or HttpClients::SYMFONY. */
    abstract protected static function client(): string;

    protected static function webSuite(): string
    {
        return 'middleware';
    }

    protected function setUp(): void
    {
        parent::setUp();
        self::requireGanesha();
        $missing = HttpClients::missing(static::client());
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    /**
     * The whole life of a circuit around a failing upstream, every step of it served by several
     * workers of the pool at once, on a fixed time T (the half-open interval passes when the
     * test moves it, not by sleeping):
     *  - at T, the upstream answers 503: 3 calls at once from 3 workers reach it and are counted
     *    as failures under the derived service (below minimumRequests); the 4th trips it;
     *  - every worker then refuses at once (RejectedException naming the service) without
     *    reaching the upstream;
     *  - at T+3, after the interval of 2 s: of every worker asking at once, one trial reaches the
     *    upstream, still failing; the others are refused;
     *  - at T+6, the upstream answers 200: one call, the next trial, succeeds and calms the
     *    circuit down, and every worker at once reaches the upstream again.
     */
    protected function assertTheCircuitGuardsTheUpstream(): void
    {
        $server = $this->startFpm(maxChildren: 4);
        $upstream = $this->stopInTearDown(Upstream::start($this->tempDir()));
        $at = \time();
        $call = fn (int $now): array => ['op' => 'call', 'client' => static::client(), 'url' => $upstream->url('/resource'), 'now' => $now] + self::CIRCUIT;

        $upstream->answerWith(503);
        $failed = self::everyWorker($server, self::script(), $call($at), 3);
        self::assertSame(\array_fill(0, 3, ['status' => 503, 'events' => []]), self::outcomes($failed), 'three 503s, no trip');
        self::assertSame(3, $upstream->requests());
        self::assertSame([self::SERVICE => [3, 0, 0, Ganesha::STATUS_CALMED_DOWN]], self::services($server, $at), 'failures, successes, rejections, status by service');
        $tripping = $server->json(self::script(), $call($at));
        self::assertSame(['status' => 503, 'events' => [[Ganesha::EVENT_TRIPPED, self::SERVICE]]], self::outcomes([$tripping])[0], 'the 4th failure trips');
        $pids = [...\array_keys($failed), $tripping['pid']];

        $refused = self::everyWorker($server, self::script(), $call($at));
        self::assertSame(\array_fill(0, 4, ['rejected' => self::SERVICE, 'events' => []]), self::outcomes($refused), 'every worker refuses');
        self::assertSame(4, $upstream->requests(), 'no refused call reached the upstream');
        self::assertSame([self::SERVICE => [4, 0, 4, Ganesha::STATUS_TRIPPED]], self::services($server, $at));

        $trials = self::everyWorker($server, self::script(), $call($at + 3));
        $admitted = \array_filter(self::outcomes($trials), static fn (array $outcome): bool => isset($outcome['status']));
        self::assertSame([['status' => 503, 'events' => []]], \array_values($admitted), 'one trial for the pool, which fails');
        self::assertSame(
            \array_fill(0, 3, ['rejected' => self::SERVICE, 'events' => []]),
            \array_values(\array_diff_key(self::outcomes($trials), $admitted)),
            'the other workers refuse'
        );
        self::assertSame(5, $upstream->requests(), 'the trial alone reached the upstream');
        self::assertSame([self::SERVICE => [5, 0, 7, Ganesha::STATUS_TRIPPED]], self::services($server, $at + 3));

        $upstream->answerWith(200);
        $closing = $server->json(self::script(), $call($at + 6));
        self::assertSame(['status' => 200, 'events' => [[Ganesha::EVENT_CALMED_DOWN, self::SERVICE]]], self::outcomes([$closing])[0], 'the next trial succeeds and calms the circuit down');
        $closed = self::everyWorker($server, self::script(), $call($at + 6));
        self::assertSame(\array_fill(0, 4, ['status' => 200, 'events' => []]), self::outcomes($closed), 'every worker reaches the upstream again');
        self::assertSame(10, $upstream->requests());
        self::assertSame([self::SERVICE => [5, 5, 7, Ganesha::STATUS_CALMED_DOWN]], self::services($server, $at + 6));

        $pids = [...$pids, ...\array_keys($refused), ...\array_keys($trials), $closing['pid'], ...\array_keys($closed)];
        self::assertGreaterThanOrEqual(2, \count(\array_unique($pids)), 'the calls were served by several workers');
    }

    private static function script(): string
    {
        return __DIR__ . '/www/call.php';
    }

    /**
     * The adapter's figures of every service the pool's segment holds, read at $now: failures,
     * successes, rejections, status, by service.
     *
     * @return array<string, array{int, int, int, int}>
     */
    private static function services(FpmServer $server, int $now): array
    {
        return $server->json(self::script(), ['op' => 'snapshot', 'client' => static::client(), 'now' => $now] + self::CIRCUIT)['services'];
    }

    /**
     * What each call came to (the status, or the service Ganesha refused), with its events.
     *
     * @param array<array-key, array<string, mixed>> $answers
     * @return list<array<string, mixed>>
     */
    private static function outcomes(array $answers): array
    {
        return \array_values(\array_map(static fn (array $answer): array => \array_diff_key($answer, ['pid' => true]), $answers));
    }
}
