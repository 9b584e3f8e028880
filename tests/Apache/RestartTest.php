<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * A full stop and start of Apache (what `systemctl restart apache2` does: the parent and every
 * child end, a new parent starts PHP afresh): with ganesha_shm.path the new parent maps the
 * same file, and its children find the counts, the statuses and the last failure times as they
 * were, a tripped circuit still tripped (docs/scope.md). Without a path,
 * the new parent has a new anonymous segment, and every circuit starts closed.
 */
final class RestartTest extends ApacheTestCase
{
    private const CHILDREN = 4;

    /** Ganesha::STATUS_TRIPPED and STATUS_CALMED_DOWN, for the tests that run without Ganesha. */
    private const TRIPPED = 2;
    private const CALMED_DOWN = 1;

    public function testWithAPathTheCountsAndStatusesSurviveAStopAndAStart(): void
    {
        $path = $this->tempDir() . '/segment';
        $ini = ['ganesha_shm.path' => $path];
        $key = Unique::name('restart_');
        $status = Unique::name('restart_status_');
        $read = ['op' => 'load', 'keys' => [$key], 'statuses' => [$status]];

        $first = $this->startApache($ini, self::CHILDREN);
        self::assertSame($path, $first->json(self::native(), ['op' => 'info'])['info']['segment']);
        self::everyChild($first, self::native(), ['op' => 'increment', 'key' => $key, 'times' => 25], self::CHILDREN);
        $first->json(self::native(), ['op' => 'save_status', 'key' => $status, 'status' => self::TRIPPED]);
        $first->json(self::native(), ['op' => 'save_last_failure_time', 'key' => $key, 'time' => 1234]);
        $this->stopCompletely($first);

        $second = $this->startApache($ini, self::CHILDREN);
        foreach (self::everyChild($second, self::native(), $read, self::CHILDREN) as $pid => $answer) {
            self::assertSame([[$key => 100], [$status => self::TRIPPED]], [$answer['counts'], $answer['statuses']], "child {$pid} of the new parent");
        }
        self::assertSame(1234, $second->json(self::native(), ['op' => 'claim', 'key' => $key])['last_failure_time']);
        $info = $second->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame([$path, 1, 1], [$info['segment'], $info['counter_slots_used'], $info['status_slots_used']]);
    }

    public function testWithAPathATrippedCircuitStaysTrippedAcrossAStopAndAStart(): void
    {
        self::requireGanesha();
        $ini = ['ganesha_shm.path' => $this->tempDir() . '/segment'];
        $circuit = ['service' => Unique::name('tripped.'), 'window' => 600, 'minimum' => 2, 'interval' => 600];

        $first = $this->startApache($ini, self::CHILDREN);
        self::everyChild($first, self::ganesha(), ['op' => 'success'] + $circuit, 2);
        self::assertSame([], $first->json(self::ganesha(), ['op' => 'failure'] + $circuit)['events']);
        $tripped = $first->json(self::ganesha(), ['op' => 'failure'] + $circuit);
        self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events']);
        $this->stopCompletely($first);

        $second = $this->startApache($ini, self::CHILDREN);
        foreach (self::everyChild($second, self::ganesha(), ['op' => 'available'] + $circuit, self::CHILDREN) as $pid => $answer) {
            self::assertFalse($answer['available'], "child {$pid} of the new parent rejects");
        }
        $snapshot = $second->json(self::ganesha(), ['op' => 'snapshot'] + $circuit)['snapshot'];
        self::assertSame(
            ['open', Ganesha::STATUS_TRIPPED, 2, 2, self::CHILDREN],
            [$snapshot['state'], $snapshot['status'], $snapshot['failures'], $snapshot['successes'], $snapshot['rejections']]
        );
    }

    public function testWithoutAPathAStopAndAStartForgetTheCircuits(): void
    {
        $key = Unique::name('forgotten_');
        $status = Unique::name('forgotten_status_');

        $first = $this->startApache([], self::CHILDREN);
        self::everyChild($first, self::native(), ['op' => 'increment', 'key' => $key], self::CHILDREN);
        $first->json(self::native(), ['op' => 'save_status', 'key' => $status, 'status' => self::TRIPPED]);
        $this->stopCompletely($first);

        $second = $this->startApache([], self::CHILDREN);
        foreach (self::everyChild($second, self::native(), ['op' => 'load', 'keys' => [$key], 'statuses' => [$status]], self::CHILDREN) as $pid => $answer) {
            self::assertSame([[$key => 0], [$status => self::CALMED_DOWN]], [$answer['counts'], $answer['statuses']], "child {$pid} of the new parent: a new segment");
        }
    }

    /** Stops the server, and checks that SIGTERM ended the parent and every child. */
    private function stopCompletely(ApacheServer $server): void
    {
        $processes = [$server->parentPid(), ...$server->childPids()];
        self::assertTrue($server->stop(), 'SIGTERM ends the parent and its children');
        self::assertSame([], \array_values(\array_filter($processes, static fn (int $pid): bool => ProcFs::alive($pid))), 'no process of the stopped server is left');
    }
}
