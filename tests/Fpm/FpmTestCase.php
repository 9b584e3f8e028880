<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * Base of the fpm suite: every test starts php-fpm masters of its own (FpmServer), so every
 * test has a segment of its own, and they are all stopped in tearDown(). Skipped when php-fpm
 * or cgi-fcgi is not installed (.ci/install-deps installs both).
 *
 * @requires extension posix
 */
#[RequiresPhpExtension('posix')]
abstract class FpmTestCase extends TestCase
{
    /** @var list<FpmServer> */
    private array $servers = [];

    /** @var list<string> */
    private array $tempDirs = [];

    protected function setUp(): void
    {
        $missing = FpmServer::missing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    protected function tearDown(): void
    {
        $servers = $this->servers;
        $this->servers = [];
        foreach ($servers as $server) {
            $server->stop();
        }
        foreach ($this->tempDirs as $dir) {
            TempDir::remove($dir);
        }
        $this->tempDirs = [];
    }

    /** A new empty directory, removed with the files in it after the test. */
    protected function tempDir(): string
    {
        $dir = TempDir::create('ganesha-shm-fpm-test-');
        $this->tempDirs[] = $dir;

        return $dir;
    }

    /**
     * @param array<string, scalar> $ini
     * @param 'static'|'ondemand' $pm
     */
    protected function startFpm(array $ini = [], string $pm = 'static', int $maxChildren = 4, array $pool = []): FpmServer
    {
        $server = FpmServer::start($ini, $pm, $maxChildren, $pool);
        $this->servers[] = $server;

        return $server;
    }

    /** Skips the test when Ganesha is not loadable, as the ganesha suite is skipped. */
    protected static function requireGanesha(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    protected static function native(): string
    {
        return FpmServer::script('native');
    }

    protected static function ganesha(): string
    {
        return FpmServer::script('ganesha');
    }

    /**
     * Sends $parties copies of the request at once through a barrier, so that $parties distinct
     * workers serve them at the same time; returns the answers keyed by worker pid, and fails
     * unless they came from $parties distinct workers.
     *
     * @param array<string, scalar|list<string>> $query
     * @return array<int, array<string, mixed>>
     */
    protected static function everyWorker(FpmServer $server, string $script, array $query, int $parties = 4): array
    {
        $answers = $server->jsonAll($script, \array_fill(0, $parties, $query + $server->barrier($parties)));
        $byPid = [];
        foreach ($answers as $answer) {
            $byPid[$answer['pid']] = $answer;
        }
        self::assertCount($parties, $byPid, 'requests held at a barrier together are served by distinct workers');
        \ksort($byPid);

        return $byPid;
    }

    /**
     * Totals of what load clients counted.
     *
     * @param list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}> $clients
     * @return array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}
     */
    protected static function total(array $clients): array
    {
        $total = ['sent' => 0, 'ok' => 0, 'failed' => 0, 'pids' => [], 'errors' => [], 'seconds' => 0.0];
        foreach ($clients as $client) {
            $total['sent'] += $client['sent'];
            $total['ok'] += $client['ok'];
            $total['failed'] += $client['failed'];
            $total['errors'] = [...$total['errors'], ...$client['errors']];
            $total['seconds'] = \max($total['seconds'], $client['seconds']);
            foreach ($client['pids'] as $pid => $count) {
                $total['pids'][$pid] = ($total['pids'][$pid] ?? 0) + $count;
            }
        }
        \ksort($total['pids']);

        return $total;
    }

    /** A line of figures on STDERR (PHPUnit checks the tests print nothing on STDOUT). */
    protected static function report(string $line): void
    {
        \fwrite(\STDERR, 'fpm: ' . $line . \PHP_EOL);
    }

    /** @param array<int, int> $pids pid => requests served */
    protected static function describePids(array $pids): string
    {
        $parts = [];
        foreach ($pids as $pid => $count) {
            $parts[] = "{$pid}×{$count}";
        }

        return \implode(' ', $parts);
    }
}
