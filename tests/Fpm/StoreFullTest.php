<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * A full store under php-fpm, with ganesha_shm.max_services=4: four workers at once fill it
 * with four services (their 3 counters and status each); the next service is refused with the
 * exception naming the setting (Ganesha's StorageException when Ganesha is loaded, so that
 * Ganesha fails open and emits storage_error), while every stored service keeps its exact
 * counts and keeps counting. The reuse of expired slots is tested natively
 * (tests/Native/StoreFullTest.php), on a clock of its own.
 */
final class StoreFullTest extends FpmTestCase
{
    private const MAX_SERVICES = 4;

    public function testTheNextServiceIsRefusedAndTheStoredOnesKeepTheirCounts(): void
    {
        $server = $this->startFpm(['ganesha_shm.max_services' => self::MAX_SERVICES]);
        $services = $this->fill($server);

        $refused = $server->json(self::native(), ['op' => 'fill', 'service' => Unique::name('fifth.'), 'n' => 1, 'catch' => 1])['error'];
        self::assertSame(\RuntimeException::class, $refused[0], 'without Ganesha: RuntimeException');
        self::assertStringContainsString('ganesha_shm.max_services', $refused[1]);
        $refused = $server->json(self::native(), ['op' => 'save_status', 'key' => 'ganesha_' . Unique::name('fifth.') . '_status', 'status' => 2, 'catch' => 1])['error'];
        self::assertSame(\RuntimeException::class, $refused[0], 'a new status is refused too');
        self::assertStringContainsString('ganesha_shm.max_services', $refused[1]);

        $this->assertCounts($server, $services);
        $server->json(self::native(), ['op' => 'increment', 'key' => "ganesha_{$services[1]}_failure"]);
        $server->json(self::native(), ['op' => 'save_status', 'key' => "ganesha_{$services[4]}_status", 'status' => 2]);
        $this->assertCounts($server, $services, [1 => 1], [4 => 2]);

        $info = $server->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame([12, 4], [$info['counter_slots_used'], $info['status_slots_used']]);
        self::assertGreaterThanOrEqual(2, $info['full_errors']);
        self::report(\sprintf(
            'max_services=%d: segment %d B, bytes_per_service %d B (ganesha_shm_info()), %d refusals counted',
            $info['max_services'],
            $info['segment_bytes'],
            $info['bytes_per_service'],
            $info['full_errors']
        ));
    }

    public function testGaneshaFailsOpenForTheNextServiceAndKeepsTheStoredOnes(): void
    {
        self::requireGanesha();
        $server = $this->startFpm(['ganesha_shm.max_services' => self::MAX_SERVICES]);
        $services = $this->fill($server, Ganesha::STATUS_CALMED_DOWN);
        $fifth = ['service' => Unique::name('fifth.'), 'window' => 600, 'minimum' => 2];

        // two failures would trip it (minimumRequests 2) if they could be recorded
        foreach ([1, 2] as $failure) {
            $events = $server->json(self::ganesha(), ['op' => 'failure'] + $fifth)['events'];
            self::assertCount(1, $events, "failure {$failure}");
            [$event, $service, $message] = $events[0];
            self::assertSame([Ganesha::EVENT_STORAGE_ERROR, $fifth['service']], [$event, $service], "failure {$failure}");
            self::assertStringStartsWith('failed to record failure', $message);
            self::assertStringContainsString('ganesha_shm.max_services', $message);
        }
        $available = $server->json(self::ganesha(), ['op' => 'available'] + $fifth);
        self::assertSame([true, []], [$available['available'], $available['events']], 'Ganesha fails open: the service it cannot track stays available');
        $thrown = $server->json(self::ganesha(), ['op' => 'increment', 'catch' => 1] + $fifth)['error'];
        self::assertSame(Ganesha\Exception\StorageException::class, $thrown[0], 'the adapter throws Ganesha\'s StorageException');

        // a stored service keeps working through Ganesha
        $first = ['service' => $services[1], 'window' => 600];
        self::assertSame([], $server->json(self::ganesha(), ['op' => 'failure'] + $first)['events']);
        self::assertSame([], $server->json(self::ganesha(), ['op' => 'success'] + $first)['events']);
        $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot'] + $first)['snapshot'];
        self::assertSame([3, 2, 3, 'closed'], [$snapshot['failures'], $snapshot['successes'], $snapshot['rejections'], $snapshot['state']]);
        $this->assertCounts($server, $services, [1 => 1], [], [1 => 1], Ganesha::STATUS_CALMED_DOWN);
    }

    /**
     * Four workers at once each store a service: service i has i successes, 2i failures, 3i
     * rejections and status i (or $status): the store is full.
     *
     * @return array<int, string> the services, by i
     */
    private function fill(FpmServer $server, ?int $status = null): array
    {
        $barrier = $server->barrier(self::MAX_SERVICES);
        $services = [];
        $queries = [];
        for ($i = 1; $i <= self::MAX_SERVICES; ++$i) {
            $services[$i] = Unique::name("s{$i}.");
            $queries[] = ['op' => 'fill', 'service' => $services[$i], 'n' => $i, 'status' => $status ?? $i, 'catch' => 1] + $barrier;
        }
        $answers = $server->jsonAll(self::native(), $queries);
        self::assertSame(\array_fill(0, self::MAX_SERVICES, null), \array_column($answers, 'error'));
        self::assertCount(self::MAX_SERVICES, \array_unique(\array_column($answers, 'pid')), 'four workers filled the store');

        $info = $server->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame(self::MAX_SERVICES, $info['max_services']);
        self::assertSame([3 * self::MAX_SERVICES, self::MAX_SERVICES, 0], [$info['counter_slots_used'], $info['status_slots_used'], $info['full_errors']], 'the store is full');

        return $services;
    }

    /**
     * Every worker reads the counts fill() stored, plus the given extra failures and successes,
     * and the statuses.
     *
     * @param array<int, string> $services
     * @param array<int, int> $moreFailures
     * @param array<int, int> $statuses status of service i when not what fill() stored
     * @param array<int, int> $moreSuccesses
     */
    private function assertCounts(FpmServer $server, array $services, array $moreFailures = [], array $statuses = [], array $moreSuccesses = [], ?int $status = null): void
    {
        $expected = ['counts' => [], 'statuses' => []];
        foreach ($services as $i => $service) {
            $expected['counts']["ganesha_{$service}_success"] = $i + ($moreSuccesses[$i] ?? 0);
            $expected['counts']["ganesha_{$service}_failure"] = 2 * $i + ($moreFailures[$i] ?? 0);
            $expected['counts']["ganesha_{$service}_rejection"] = 3 * $i;
            $expected['statuses']["ganesha_{$service}_status"] = $statuses[$i] ?? $status ?? $i;
        }
        $query = ['op' => 'load', 'keys' => \array_keys($expected['counts']), 'statuses' => \array_keys($expected['statuses'])];
        foreach (self::everyWorker($server, self::native(), $query) as $pid => $answer) {
            self::assertSame($expected, ['counts' => $answer['counts'], 'statuses' => $answer['statuses']], "worker {$pid}");
        }
    }
}
