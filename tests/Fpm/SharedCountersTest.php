<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use PHPUnit\Framework\Attributes\DataProvider;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The promise of the README's first paragraph, under the real php-fpm: the master creates the
 * segment at startup, so every worker counts into the same counters. Requests from several
 * concurrent clients, served by several workers, each increment one key once: the count read
 * back through php-fpm is exactly the number of requests, held in one counter slot.
 *
 * With pm=static the workers are forked at startup; with pm=ondemand only when requests come,
 * long after the segment was created: both share it.
 */
final class SharedCountersTest extends FpmTestCase
{
    private const CLIENTS = 4;

    private const REQUESTS_EACH = 50;

    /** @return array<string, array{'static'|'ondemand'}> */
    public static function pools(): array
    {
        return ['pm=static' => ['static'], 'pm=ondemand' => ['ondemand']];
    }

    /**
     * @dataProvider pools
     * @param 'static'|'ondemand' $pm
     */
    #[DataProvider('pools')]
    public function testIncrementsFromEveryWorkerAddUpExactly(string $pm): void
    {
        $server = $this->startFpm(pm: $pm);
        if ($pm === 'ondemand') {
            self::assertSame([], $server->workerPids(), 'pm=ondemand forks no worker before the first request');
        }
        $service = Unique::name('shared.');
        $key = "ganesha_{$service}_success";
        $requests = self::CLIENTS * self::REQUESTS_EACH;

        $total = self::total($server->clients(self::CLIENTS, self::native(), ['op' => 'increment', 'key' => $key], self::REQUESTS_EACH));

        self::assertSame([], $total['errors']);
        self::assertSame([$requests, $requests, 0], [$total['sent'], $total['ok'], $total['failed']]);
        self::assertGreaterThanOrEqual(2, \count($total['pids']), 'several workers served the increments: ' . self::describePids($total['pids']));
        self::assertSame([$key => $requests], $server->json(self::native(), ['op' => 'load', 'keys' => [$key]])['counts']);
        $info = $server->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame(1, $info['counter_slots_used'], 'one slot for the key, however many workers created it at once');
        self::assertSame(0, $info['status_slots_used']);
        if (Autoload::ganeshaMissing() === null) {
            // the same count through Ganesha's configuration of the keys (time window 600 s, so
            // buckets of 10 s, as the native script's)
            $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot', 'service' => $service, 'window' => 600])['snapshot'];
            self::assertSame([$requests, 0], [$snapshot['successes'], $snapshot['failures']]);
        }
        self::report(\sprintf('pm=%s: %d increments by %d clients, served by workers %s', $pm, $requests, self::CLIENTS, self::describePids($total['pids'])));
    }
}
