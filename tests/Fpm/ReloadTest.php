<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The scope of the circuits across a php-fpm reload (SIGUSR2, what `systemctl reload` sends:
 * the master stops its workers and execs itself, keeping its pid and its socket, so PHP
 * starts again and the extension with it).
 *
 * By default the segment is anonymous: the reloaded master creates a new one, and every count
 * starts again from 0 (docs/scope.md). With ganesha_shm.path, the segment
 * is that file: the reloaded master maps it again and finds the circuits as they were, and so
 * does any PHP process mapping the same file, a CLI command for instance.
 */
final class ReloadTest extends FpmTestCase
{
    public function testWithoutAPathTheCountsStartAgainAfterAReload(): void
    {
        $server = $this->startFpm();
        $key = Unique::name('reload_');
        $status = Unique::name('reload_status_');
        $read = ['op' => 'load', 'keys' => [$key], 'statuses' => [$status]];
        self::assertSame('anonymous', $server->json(self::native(), ['op' => 'info'])['info']['segment']);
        self::everyWorker($server, self::native(), ['op' => 'increment', 'key' => $key]);
        $server->json(self::native(), ['op' => 'save_status', 'key' => $status, 'status' => 2]);
        $before = $server->workerPids();
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([[$key => 4], [$status => 2]], [$answer['counts'], $answer['statuses']], "worker {$pid} before the reload");
        }

        $server->reload();

        self::assertSame([], \array_intersect($server->workerPids(), $before), 'new workers');
        self::assertTrue(\posix_kill($server->masterPid(), 0), 'the same master');
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([[$key => 0], [$status => 1]], [$answer['counts'], $answer['statuses']], "worker {$pid} after the reload: a new segment");
        }
        $info = $server->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame(['anonymous', 0, 0], [$info['segment'], $info['counter_slots_used'], $info['status_slots_used']]);
    }

    public function testWithAPathTheCountsSurviveAReloadAndAreSharedWithTheCli(): void
    {
        $path = $this->segmentPath();
        $server = $this->startFpm(['ganesha_shm.path' => $path]);
        self::assertSame($path, $server->json(self::native(), ['op' => 'info'])['info']['segment'], 'php-fpm maps the file of ganesha_shm.path');
        $key = Unique::name('kept_');
        $status = Unique::name('kept_status_');
        $read = ['op' => 'load', 'keys' => [$key], 'statuses' => [$status]];
        $total = self::total($server->clients(4, self::native(), ['op' => 'increment', 'key' => $key], 5));
        self::assertSame([20, 0], [$total['ok'], $total['failed']]);
        $server->json(self::native(), ['op' => 'save_status', 'key' => $status, 'status' => 2]);
        $server->json(self::native(), ['op' => 'save_last_failure_time', 'key' => $key, 'time' => 1234]);
        $before = $server->workerPids();

        $server->reload();

        self::assertSame([], \array_intersect($server->workerPids(), $before), 'new workers');
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([[$key => 20], [$status => 2]], [$answer['counts'], $answer['statuses']], "worker {$pid} after the reload");
        }
        self::assertSame(1234, $server->json(self::native(), ['op' => 'claim', 'key' => $key])['last_failure_time']);

        // a CLI process, no child of php-fpm, mapping the same file
        $cli = Php::json(Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(600));
            $r = ["segment" => ganesha_shm_info()["segment"], "count" => $a->load(%3$s), "status" => $a->loadStatus(%4$s)];
            $a->increment(%3$s);
            echo json_encode($r);',
            TestAdapter::class,
            FakeContext::class,
            \var_export($key, true),
            \var_export($status, true)
        ), ['ganesha_shm.path' => $path]);
        self::assertSame(['segment' => $path, 'count' => 20, 'status' => 2], $cli);
        foreach (self::everyWorker($server, self::native(), $read) as $pid => $answer) {
            self::assertSame([$key => 21], $answer['counts'], "worker {$pid} sees the CLI's increment");
        }
    }

    public function testWithAPathATrippedCircuitStaysTrippedAcrossAReload(): void
    {
        self::requireGanesha();
        $path = $this->segmentPath();
        $server = $this->startFpm(['ganesha_shm.path' => $path]);
        $circuit = ['service' => Unique::name('tripped.'), 'window' => 600, 'minimum' => 2, 'interval' => 600];
        self::everyWorker($server, self::ganesha(), ['op' => 'success'] + $circuit, 2);
        self::assertSame([], $server->json(self::ganesha(), ['op' => 'failure'] + $circuit)['events']);
        $tripped = $server->json(self::ganesha(), ['op' => 'failure'] + $circuit);
        self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events']);
        $before = $server->workerPids();

        $server->reload();

        self::assertSame([], \array_intersect($server->workerPids(), $before), 'new workers');
        foreach (self::everyWorker($server, self::ganesha(), ['op' => 'available'] + $circuit) as $pid => $answer) {
            self::assertFalse($answer['available'], "worker {$pid} after the reload rejects");
        }
        $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot'] + $circuit)['snapshot'];
        self::assertSame(
            ['open', Ganesha::STATUS_TRIPPED, 2, 2, 4],
            [$snapshot['state'], $snapshot['status'], $snapshot['failures'], $snapshot['successes'], $snapshot['rejections']]
        );
    }

    /** A path for ganesha_shm.path: a file not created yet, in a new temporary directory. */
    private function segmentPath(): string
    {
        return $this->tempDir() . '/segment';
    }
}
