<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\LoadResults;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * Base of the apache suite: every test starts Apache servers of its own (ApacheServer), so
 * every test has a segment of its own, and they are all stopped in tearDown(). Skipped when
 * apache2 or mod_php of this PHP version is not installed (.ci/install-deps installs both).
 *
 * @requires extension posix
 */
#[RequiresPhpExtension('posix')]
abstract class ApacheTestCase extends TestCase
{
    /** @var list<ApacheServer> */
    private array $servers = [];

    /** @var list<string> */
    private array $tempDirs = [];

    protected function setUp(): void
    {
        $missing = ApacheServer::missing();
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

    /** A new empty directory (mode 0700), removed with the files in it after the test. */
    protected function tempDir(): string
    {
        $dir = TempDir::create('ganesha-shm-apache-test-');
        $this->tempDirs[] = $dir;

        return $dir;
    }

    /**
     * @param array<string, scalar> $ini
     * @param array<string, scalar> $directives
     */
    protected function startApache(array $ini = [], int $startServers = 4, int $maxRequestWorkers = 8, array $directives = []): ApacheServer
    {
        $server = ApacheServer::start($ini, $startServers, $maxRequestWorkers, $directives);
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
        return ApacheServer::script('native');
    }

    protected static function ganesha(): string
    {
        return ApacheServer::script('ganesha');
    }

    /**
     * Sends $parties copies of the request at once through a barrier, so that $parties distinct
     * children serve them at the same time; returns the answers keyed by child pid, and fails
     * unless they came from $parties distinct children.
     *
     * @param array<string, scalar|list<string>> $query
     * @return array<int, array<string, mixed>>
     */
    protected static function everyChild(ApacheServer $server, string $script, array $query, int $parties = 4): array
    {
        $answers = $server->jsonAll($script, \array_fill(0, $parties, $query + $server->barrier($parties)));
        $byPid = [];
        foreach ($answers as $answer) {
            $byPid[$answer['pid']] = $answer;
        }
        self::assertCount($parties, $byPid, 'requests held at a barrier together are served by distinct children');
        \ksort($byPid);

        return $byPid;
    }

    /**
     * Totals of what load clients counted (LoadResults::total()).
     *
     * @param list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}> $clients
     * @return array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}
     */
    protected static function total(array $clients): array
    {
        return LoadResults::total($clients);
    }

    /** @param array<int, int> $pids pid => requests served */
    protected static function describePids(array $pids): string
    {
        return LoadResults::describePids($pids);
    }

    /** A line of figures on STDERR (PHPUnit checks the tests print nothing on STDOUT). */
    protected static function report(string $line): void
    {
        \fwrite(\STDERR, 'apache: ' . $line . \PHP_EOL);
    }
}
