<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetSidecar;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Base of the fleet suite: "hosts" on this machine, each with its own segment file, a PHP
 * process in fleet mode running the real Ganesha over SlidingTimeWindowShm, and its sidecar,
 * all syncing through a redis-server the test starts on the loopback and stops by pid.
 * Skipped when Ganesha is not loadable or redis-server is not installed (.ci/install-deps
 * installs it).
 */
abstract class FleetTestCase extends TestCase
{
    protected const INTERVAL_MS = 300;

    /** Ganesha's settings of the hosts, unless a test gives others. */
    protected const GANESHA = ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => 6, 'intervalToHalfOpen' => 600];

    protected string $dir;

    protected ?RedisServer $redis = null;

    /** @var list<RedisServer> the nodes of a cluster a test made */
    protected array $nodes = [];

    /** @var array<string, FleetHost> */
    protected array $hosts = [];

    protected string $fleet;

    protected function setUp(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        if (RedisServer::binary('redis-server') === null || RedisServer::binary('redis-cli') === null) {
            self::markTestSkipped('redis-server and redis-cli are not installed (apt-get install redis-server)');
        }
        $this->dir = TempDir::create('ganesha_shm_fleet.');
        $this->fleet = Unique::name('fleet');
    }

    protected function tearDown(): void
    {
        foreach ($this->hosts as $host) {
            $host->close();
        }
        $this->redis?->stop();
        foreach ($this->nodes as $node) {
            $node->stop();
        }
        TempDir::remove($this->dir);
    }

    /**
     * Starts $count hosts named h1, h2, … with their sidecars on $redisUrl (default: a new
     * redis-server of the test).
     *
     * @param array<string, int> $ganesha
     * @param list<string> $sidecarFlags more flags for the sidecars
     * @param array<string, array<string, string|int>> $ini more PHP settings, by host name
     * @return list<FleetHost>
     */
    protected function startHosts(int $count = 3, array $ganesha = self::GANESHA, ?string $redisUrl = null, array $sidecarFlags = [], array $ini = []): array
    {
        if ($redisUrl === null) {
            $this->redis ??= RedisServer::start($this->dir);
            $redisUrl = $this->redis->url();
        }
        for ($i = 1; $i <= $count; ++$i) {
            $name = "h{$i}";
            $host = new FleetHost($name, "{$this->dir}/{$name}.segment", $ganesha, "{$this->dir}/{$name}.php.log", $ini[$name] ?? []);
            $host->snapshot(); // the segment file exists once PHP has started
            $host->sidecar = FleetSidecar::start([
                '--segment', $host->segment, '--redis', $redisUrl, '--fleet', $this->fleet, '--host', $name,
                '--interval-ms', (string) self::INTERVAL_MS, '--connect-timeout-ms', '300', '--command-timeout-ms', '300',
                ...$sidecarFlags,
            ], "{$this->dir}/{$name}.fleet.log");
            $this->hosts[$name] = $host;
        }
        $this->waitForSyncs(\array_values($this->hosts), $this->nowMs(), 1);

        return \array_values($this->hosts);
    }

    /** CLOCK_MONOTONIC in ms, the clock the segment's sync times are on. */
    protected function nowMs(): int
    {
        return \intdiv(\hrtime(true), 1_000_000);
    }

    /**
     * Waits until every host's sidecar has synced $intervals intervals after $sinceMs, and
     * returns how long that took. Fails after 20 s.
     *
     * @param list<FleetHost> $hosts
     */
    protected function waitForSyncs(array $hosts, int $sinceMs, int $intervals = 2): int
    {
        $deadline = \microtime(true) + 20.0;
        foreach ($hosts as $host) {
            while (($synced = $host->syncedAtMs()) === null || $synced < $sinceMs + $intervals * self::INTERVAL_MS) {
                if (\microtime(true) > $deadline) {
                    self::fail("host {$host->name} did not sync {$intervals} intervals after {$sinceMs} ms:\n" . $this->logs());
                }
                \usleep(20_000);
            }
        }

        return $this->nowMs() - $sinceMs;
    }

    /**
     * Waits until $condition holds (polled every 20 ms); how long it took. Fails after $seconds.
     */
    protected function waitUntil(callable $condition, string $what, float $seconds = 20.0): int
    {
        $started = $this->nowMs();
        $deadline = \microtime(true) + $seconds;
        while (!$condition()) {
            if (\microtime(true) > $deadline) {
                self::fail("{$what}: not after {$seconds} s\n" . $this->logs());
            }
            \usleep(20_000);
        }

        return $this->nowMs() - $started;
    }

    /** @return array{failures: int, successes: int, rejections: int}|null this host's own counts */
    protected static function own(FleetHost $host, string $service): ?array
    {
        $row = $host->snapshot()['snapshot'][$service] ?? null;

        return $row === null ? null : ['failures' => $row['failures'], 'successes' => $row['successes'], 'rejections' => $row['rejections']];
    }

    /** @return array{failures: int, successes: int, rejections: int}|null the fleet's counts, null while stale */
    protected static function fleetCounts(FleetHost $host, string $service): ?array
    {
        $fleet = $host->snapshot()['snapshot'][$service]['fleet'] ?? null;

        return $fleet === null ? null : ['failures' => $fleet['failures'], 'successes' => $fleet['successes'], 'rejections' => $fleet['rejections']];
    }

    protected static function service(string $stem = 'svc'): string
    {
        return Unique::name($stem . '.');
    }

    /** The sidecars' logs, for failure messages. */
    protected function logs(): string
    {
        $logs = '';
        foreach ($this->hosts as $host) {
            $logs .= "--- {$host->name}\n" . ($host->sidecar?->logText() ?? '') . @\file_get_contents("{$this->dir}/{$host->name}.php.log");
        }

        return $logs;
    }

    /** One line for the test's report (stderr, which PHPUnit leaves alone). */
    protected static function report(string $line): void
    {
        \fwrite(\STDERR, 'fleet: ' . $line . \PHP_EOL);
    }
}
