<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Sustained load: 8 clients, each sending requests one after the other through cgi-fcgi for
 * 20 s, against a pool of 4 workers that each increment one key: no request fails, and the
 * count is exactly the number of requests. The throughput is reported on STDERR, not
 * asserted (it measures the clients' process starts as much as anything).
 */
final class LoadTest extends FpmTestCase
{
    private const CLIENTS = 8;

    private const WORKERS = 4;

    private const SECONDS = 20.0;

    public function testEightClientsForTwentySecondsLoseNoIncrement(): void
    {
        $server = $this->startFpm(maxChildren: self::WORKERS);
        $workers = $server->workerPids();
        $key = Unique::name('load_');

        $total = self::total($server->clients(self::CLIENTS, self::native(), ['op' => 'increment', 'key' => $key], seconds: self::SECONDS));

        self::assertSame([], $total['errors']);
        self::assertSame(0, $total['failed']);
        self::assertSame($total['sent'], $total['ok']);
        self::assertGreaterThan(0, $total['sent']);
        self::assertSame([$key => $total['sent']], $server->json(self::native(), ['op' => 'load', 'keys' => [$key]])['counts'], 'every request counted once');
        self::assertSame($workers, $server->workerPids(), 'no worker was replaced');
        self::assertSame([], \array_diff(\array_keys($total['pids']), $workers), 'every request was served by a worker of the pool');
        self::report(\sprintf(
            'load: %d requests in %.1f s by %d clients, %.0f requests/s, 0 failed; workers %s',
            $total['sent'],
            $total['seconds'],
            self::CLIENTS,
            $total['sent'] / $total['seconds'],
            self::describePids($total['pids'])
        ));
    }
}
