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
     * @param array<string, array<string, string>> $env more environment of PHP and the sidecar, by host name
     * @return list<FleetHost>
     */
    protected function startHosts(int $count = 3, array $ganesha = self::GANESHA, ?string $redisUrl = null, array $sidecarFlags = [], array $ini = [], array $env = []): array
    {
        for ($i = 1; $i <= $count; ++$i) {
            $name = "h{$i}";
            $this->startHost($name, $ganesha, $redisUrl, $sidecarFlags, $ini[$name] ?? [], $env[$name] ?? []);
        }
        $this->waitForSyncs(\array_values($this->hosts), $this->nowMs(), 1);

        return \array_values($this->hosts);
    }

    /**
     * Starts one host and its sidecar (--host $label, default its name), without waiting for
     * a sync.
     *
     * @param array<string, int> $ganesha
     * @param list<string> $sidecarFlags
     * @param array<string, string|int> $ini
     * @param array<string, string> $env more environment of its PHP and its sidecar
     */
    protected function startHost(string $name, array $ganesha = self::GANESHA, ?string $redisUrl = null, array $sidecarFlags = [], array $ini = [], array $env = [], ?string $label = null): FleetHost
    {
        if ($redisUrl === null) {
            $this->redis ??= RedisServer::start($this->dir);
            $redisUrl = $this->redis->url();
        }
        $host = new FleetHost($name, "{$this->dir}/{$name}.segment", $ganesha, "{$this->dir}/{$name}.php.log", $ini, $env);
        $this->hosts[$name] = $host;
        $host->snapshot(); // the segment file exists once PHP has started
        $host->sidecar = FleetSidecar::start($this->sidecarArgs($host, $redisUrl, $label ?? $name, $sidecarFlags), "{$this->dir}/{$name}.fleet.log", $env);

        return $host;
    }

    /**
     * The flags of a sidecar of $host, named $label (--host).
     *
     * @param list<string> $more
     * @return list<string>
     */
    protected function sidecarArgs(FleetHost $host, string $redisUrl, string $label, array $more = []): array
    {
        return [
            '--segment', $host->segment, '--redis', $redisUrl, '--fleet', $this->fleet, '--host', $label,
            '--interval-ms', (string) self::INTERVAL_MS, '--connect-timeout-ms', '300', '--command-timeout-ms', '300',
            ...$more,
        ];
    }

    /**
     * The keys of the test's redis-server matching $pattern (SCAN's glob), sorted.
     *
     * @return list<string>
     */
    protected function keys(string $pattern = '*'): array
    {
        $keys = \array_values(\array_filter(\explode("\n", $this->redis->cli(['--scan', '--pattern', $pattern])['stdout'])));
        \sort($keys);

        return $keys;
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

    /**
     * Waits until $keys() lists no key; how long it took. Fails after $seconds, with the TTL of
     * each key left.
     *
     * @param callable(): list<string> $keys
     */
    protected function waitForNoKeys(callable $keys, string $what, float $seconds): int
    {
        $started = $this->nowMs();
        $deadline = \microtime(true) + $seconds;
        while (($left = $keys()) !== []) {
            if (\microtime(true) > $deadline) {
                $ttls = [];
                foreach ($left as $key) {
                    $ttls[$key] = (int) $this->redis->cli(['TTL', $key])['stdout'];
                }
                self::assertSame([], $ttls, "{$what}: keys left after {$seconds} s, with their TTLs");
            }
            \usleep(100_000);
        }

        return $this->nowMs() - $started;
    }

    /**
     * The keys of the fleet's services, of version 2 (`ganesha-shm:2:{<fleet>:<shard>}:…`) and of
     * version 1 (`ganesha-shm:{<fleet>:<service>}`, `ganesha-shm:<fleet>:services`); not the
     * fleet's keys of its live hosts (`ganesha-shm:2:{<fleet>}:…`).
     *
     * @return list<string>
     */
    protected function serviceKeys(): array
    {
        return \array_values(\array_unique([...$this->keys("*{{$this->fleet}:*"), ...$this->keys("ganesha-shm:{$this->fleet}:*")]));
    }

    /**
     * Every key with the fleet's name in it.
     *
     * @return list<string>
     */
    protected function fleetKeys(): array
    {
        return \array_values(\array_unique([...$this->keys("*{{$this->fleet}*"), ...$this->keys("ganesha-shm:{$this->fleet}:*")]));
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
