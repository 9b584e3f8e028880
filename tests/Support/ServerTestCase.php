<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

use PHPUnit\Framework\TestCase;

/**
 * What the bases of the web suites share (FpmTestCase, ApacheTestCase, which start their
 * servers and name their scripts): the test skipped in setUp() when the suite's server cannot
 * run here; the servers it started stopped in tearDown(), and its temporary directories
 * removed; answers of requests held at a barrier keyed by the pid of the process that served
 * each; the totals of load clients (LoadResults); and the lines of figures the tests report.
 */
abstract class ServerTestCase extends TestCase
{
    /** @var list<object> servers started by the test, each with a stop() */
    private array $servers = [];

    /** @var list<string> */
    private array $tempDirs = [];

    protected function setUp(): void
    {
        $missing = static::serverMissing();
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

    /** The name of the suite (fpm, apache): in its temporary directories and what it reports. */
    abstract protected static function webSuite(): string;

    /** Why the suite's server cannot run here, or null when it can. */
    abstract protected static function serverMissing(): ?string;

    /** The script of the native class, as the suite's server's json() takes it. */
    abstract protected static function native(): string;

    /** The script of the real Ganesha, as the suite's server's json() takes it. */
    abstract protected static function ganesha(): string;

    /**
     * Has $server (which has a stop()) stopped in tearDown(), with the other servers of the test.
     *
     * @template T of object
     * @param T $server
     * @return T
     */
    protected function stopInTearDown(object $server): object
    {
        $this->servers[] = $server;

        return $server;
    }

    /** A new empty directory (mode 0700), removed with the files in it after the test. */
    protected function tempDir(): string
    {
        $dir = TempDir::create('ganesha-shm-' . static::webSuite() . '-test-');
        $this->tempDirs[] = $dir;

        return $dir;
    }

    /**
     * The path of a segment file in a new directory given the group of www-data with the setgid
     * and sticky bits (mode 3770, docs/scope.md's group setup), which www-data may write, for a test
     * that has www-data truncate the file (runuser). Skips the test unless it runs as root, with
     * runuser and a www-data user.
     */
    protected function segmentPathOfWwwData(): string
    {
        $user = \posix_getpwnam('www-data');
        if (\posix_geteuid() !== 0 || $user === false || !\is_executable('/usr/sbin/runuser')) {
            self::markTestSkipped('needs root, runuser and a www-data user');
        }
        $dir = $this->tempDir();
        \chmod($dir, 03770);
        \chgrp($dir, $user['gid']);

        return $dir . '/segment';
    }

    /** Skips the test when Ganesha is not loadable, as the ganesha suite is skipped. */
    protected static function requireGanesha(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
    }

    /**
     * The answers of requests held at a barrier together, keyed by the pid of the process that
     * served each, sorted; fails unless they came from as many distinct processes.
     *
     * @param list<array<string, mixed>> $answers
     * @param string $processes what the server's processes are called (workers, children)
     * @return array<int, array<string, mixed>>
     */
    protected static function byDistinctPid(array $answers, string $processes): array
    {
        $byPid = [];
        foreach ($answers as $answer) {
            $byPid[$answer['pid']] = $answer;
        }
        self::assertCount(\count($answers), $byPid, "requests held at a barrier together are served by distinct {$processes}");
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
        \fwrite(\STDERR, static::webSuite() . ': ' . $line . \PHP_EOL);
    }
}
