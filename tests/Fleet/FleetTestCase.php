<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetSidecar;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisTls;
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

    /** Ganesha's settings that count and never trip, for the exact-count scenario (assertExactCounts()). */
    protected const COUNTING = ['timeWindow' => 600, 'failureRateThreshold' => 100, 'minimumRequests' => 1_000_000, 'intervalToHalfOpen' => 600];

    /**
     * docs/fleet.md's ACL rule for the fleet NAME: the fleet's keys, of its hosts (`{NAME}`) and of its
     * services' shards (`{NAME:<shard>}`), no channel, and the commands of a sync.
     */
    protected const ACL_RULE = 'on >PASSWORD resetkeys ~ganesha-shm:4:{NAME}* ~ganesha-shm:4:{NAME:* resetchannels -@all'
        . ' +script|load +evalsha +time +set +expire +hget +hmget +hset +hdel +zadd +zcount +zremrangebyscore +info +role +ping';

    /** What ends the line of a sidecar that cannot sync, and of no other line. */
    protected const ALONE = 'hosts decide alone until it is back';

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
     * A Redis Cluster of three masters, the test's nodes (made with `redis-cli --cluster
     * create`), once every node says it is ready; its nodes' URLs, comma-separated. With $tls,
     * every node serves TLS only, its cluster bus too.
     */
    protected function startCluster(?RedisTls $tls = null): string
    {
        for ($i = 0; $i < 3; ++$i) {
            $this->nodes[] = RedisServer::start($this->dir, true, tls: $tls, args: $tls === null ? [] : ['--tls-cluster', 'yes']);
        }
        $addresses = \array_map(fn (RedisServer $node) => '127.0.0.1:' . $node->port, $this->nodes);
        $created = $this->nodes[0]->cli(['--cluster', 'create', ...$addresses, '--cluster-replicas', '0', '--cluster-yes'], 30.0);
        self::assertSame(0, $created['exit'], $created['stdout'] . $created['stderr']);
        foreach ($this->nodes as $node) {
            $this->waitUntil(fn () => \str_contains($node->cli(['CLUSTER', 'INFO'])['stdout'], 'cluster_state:ok'), "node {$node->port} is ready");
        }

        return \implode(',', \array_map(fn (RedisServer $node) => $node->url(), $this->nodes));
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
     * Starts three hosts on $redisUrl whose sidecars are to be refused, and shows that they decide
     * alone: with 2 failures of a service on each, no host's sync state is fresh at any time for
     * four intervals of the sidecars retrying; then each has counted failed syncs, has no fleet
     * view, and is closed on its own 2 failures where the fleet's 6 would open it. Each sidecar
     * said why in one line, with no "connected to" line unless $connects (a server that accepts
     * the connection and refuses a command).
     *
     * @param list<string> $sidecarFlags
     * @return array<string, string> that line, by host name
     */
    protected function assertRefusedHostsDecideAlone(string $redisUrl, array $sidecarFlags = [], bool $connects = false): array
    {
        $service = self::service('refused');
        for ($i = 1; $i <= 3; ++$i) {
            $this->startHost("h{$i}", self::GANESHA, $redisUrl, $sidecarFlags)->record($service, 2);
        }
        $said = function (): bool {
            $said = 0;
            foreach ($this->hosts as $host) {
                self::assertTrue($host->sidecar->running(), "{$host->name}'s sidecar retries, it does not exit:\n" . $this->logs());
                $said += \min(1, $host->sidecar->logLines(self::ALONE));
            }

            return $said === \count($this->hosts);
        };
        $this->waitUntil($said, 'each sidecar says why it is refused', 10.0);
        $watched = \microtime(true) + 4 * self::INTERVAL_MS / 1000;
        while (\microtime(true) < $watched) {
            foreach ($this->hosts as $host) {
                self::assertNull($host->syncedAtMs(), "{$host->name}'s sync state is never fresh:\n" . $this->logs());
                self::assertTrue($host->sidecar->running(), "{$host->name}'s sidecar retries, it does not exit:\n" . $this->logs());
            }
            \usleep(20_000);
        }
        $lines = [];
        foreach ($this->hosts as $host) {
            self::assertGreaterThan(0, $host->snapshot()['info']['fleet_sync_errors'], "{$host->name}'s sidecar counts its failed syncs");
            self::assertNull(self::fleetCounts($host, $service), "{$host->name} has no fleet view");
            self::assertTrue($host->available($service), "{$host->name} decides alone on its 2 failures: closed");
            $log = $host->sidecar->logText();
            self::assertSame(1, $host->sidecar->logLines(self::ALONE), "one line says why, however often the sidecar retried:\n{$log}");
            if (!$connects) {
                self::assertSame(0, $host->sidecar->logLines('connected to'), "no connection:\n{$log}");
            }
            \preg_match('/^.*' . \preg_quote(self::ALONE, '/') . '.*$/m', $log, $line);
            $lines[$host->name] = $line[0];
        }

        return $lines;
    }

    /**
     * A new user with $rule (PASSWORD and NAME in it replaced by a new password and the test's
     * fleet), made with redis-cli's ACL SETUSER on each of $servers (a master and its replicas:
     * ACL SETUSER is not replicated); its name and password.
     *
     * @return array{0: string, 1: string}
     */
    protected function createUser(string $rule, RedisServer ...$servers): array
    {
        $user = 'fleet-' . \bin2hex(\random_bytes(3));
        $password = self::password();
        $args = \explode(' ', \str_replace(['PASSWORD', 'NAME'], [$password, $this->fleet], $rule));
        foreach ($servers as $server) {
            $created = $server->cli(['ACL', 'SETUSER', $user, ...$args]);
            self::assertSame("OK\n", $created['stdout'], $created['stderr']);
        }

        return [$user, $password];
    }

    /** A new password, random. */
    protected static function password(): string
    {
        return \bin2hex(\random_bytes(12));
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

    /**
     * The clients of $server (CLIENT LIST), but the redis-cli asking: the sidecars' connections.
     *
     * @return list<string>
     */
    protected static function clients(RedisServer $server): array
    {
        $clients = \explode("\n", $server->cli(['CLIENT', 'LIST'])['stdout']);

        return \array_values(\array_filter($clients, fn (string $client) => $client !== '' && !\str_contains($client, 'cmd=client|list')));
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
     * The keys of the fleet's services: its shards (`ganesha-shm:4:{<fleet>:<shard>}`), and of
     * earlier formats (`ganesha-shm:2:{<fleet>:<shard>}:…`, `ganesha-shm:{<fleet>:<service>}`,
     * `ganesha-shm:<fleet>:services`); not the fleet's keys of its live hosts
     * (`ganesha-shm:4:{<fleet>}:…`).
     *
     * @return list<string>
     */
    protected function serviceKeys(): array
    {
        return \array_values(\array_unique([...$this->keys("*{{$this->fleet}:*"), ...$this->keys("ganesha-shm:{$this->fleet}:*")]));
    }

    /**
     * The shard whose key keeps the fleet's counts of $service: FNV-1a of its Ganesha key's stem
     * (`ganesha_<service>`), modulo the 16 shards, as crates/core/src/fleet.rs's shard_of().
     */
    protected static function shardOf(string $service): int
    {
        $hash = 0x811c9dc5;
        foreach (\str_split('ganesha_' . $service) as $byte) {
            $hash = (($hash ^ \ord($byte)) * 0x01000193) & 0xffffffff;
        }

        return $hash % 16;
    }

    /** The key of the shard of $service (format 3: one hash per shard). */
    protected function shardKey(string $service): string
    {
        return "ganesha-shm:4:{{$this->fleet}:" . self::shardOf($service) . '}';
    }

    /**
     * Runs $lua in the test's redis-server (EVAL, with $keys and $args), for a fault no command
     * of redis-cli makes alone; what it returned, as redis-cli prints it.
     *
     * @param list<string> $keys
     * @param list<string> $args
     */
    protected function evalLua(string $lua, array $keys = [], array $args = []): string
    {
        $ran = $this->redis->cli(['EVAL', $lua, (string) \count($keys), ...$keys, ...$args]);
        self::assertSame('', $ran['stderr'], "the test's script failed:\n{$ran['stdout']}");
        self::assertStringNotContainsString('ERR', $ran['stdout'], "the test's script failed");

        return $ran['stdout'];
    }

    /**
     * Rows that are not counts, written by "another writer" into every bucket's sums of the shard
     * of $service (format 3), with the service's own failures there put out of range, each bucket
     * marked changed so that every host reads it again; how many buckets.
     */
    protected function spoilSums(string $service): int
    {
        return (int) $this->evalLua(<<<'LUA'
            local key = KEYS[1]
            local version = tonumber(redis.call('HGET', key, 'n')) + 1
            local index = cmsgpack.unpack(redis.call('HGET', key, 'x'))
            for i = 1, #index, 3 do
              local field = 's:' .. index[i] .. ':' .. index[i + 1]
              local rows = cmsgpack.unpack(redis.call('HGET', key, field))
              for r = 1, #rows, 4 do
                if rows[r] == ARGV[1] then
                  rows[r + 2] = 2 ^ 40
                end
              end
              for _, row in ipairs({ { 'ganesha_intruder', 'lots', 0, 0 }, { 'ganesha_negative', -2, 0, 0 },
                  { 'ganesha_huge', 1e12, 0, 0 }, { 12345, 1, 1, 1 }, { 'ganesha_half', 1.5, 0, 0 } }) do
                for _, item in ipairs(row) do
                  rows[#rows + 1] = item
                end
              end
              redis.call('HSET', key, field, cmsgpack.pack(rows))
              index[i + 2] = version
            end
            redis.call('HSET', key, 'x', cmsgpack.pack(index), 'n', version)
            return #index / 3
            LUA, [$this->shardKey($service)], ['ganesha_' . $service]);
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

    /**
     * The suite's first scenario: 2 failures of $service on each host, below minimumRequests (6)
     * alone, open every host on the fleet's 6 once the sidecars synced twice. How long that took
     * after the last failure, in ms.
     *
     * @param list<FleetHost> $hosts three hosts with Ganesha's settings of GANESHA
     */
    protected function assertFailuresSpreadOverTheFleetOpenEveryHost(array $hosts, string $service): int
    {
        foreach ($hosts as $host) {
            $host->record($service, 2);
            self::assertSame(2, self::own($host, $service)['failures'], 'alone, 2 failures are below minimumRequests (6)');
        }
        $after = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), "host {$host->name} trips on the fleet's 6 failures");
            $fleet = $host->snapshot()['snapshot'][$service]['fleet'];
            self::assertSame([6, true], [$fleet['failures'], $fleet['decides']], $host->name);
        }

        return $after;
    }

    /**
     * Random events of three services on three hosts; then every host's own counts are its own
     * events, and its fleet view is the sum of every host's. With $skewed, the views are awaited
     * (one host's clock is ahead: the others count its events once their clocks reach them).
     *
     * @param list<FleetHost> $hosts
     */
    protected function assertExactCounts(array $hosts, bool $skewed): void
    {
        $services = [self::service('mix'), self::service('mix'), self::service('mix')];
        $seen = [];
        // A success of every service on every host first: a host keeps the fleet's counts of the
        // services it counts itself.
        foreach ($hosts as $host) {
            foreach ($services as $service) {
                $host->record($service, 0, 1);
                $seen[$host->name][$service] = ['failures' => 0, 'successes' => 1];
            }
        }
        \mt_srand(22);
        for ($round = 0; $round < 12; ++$round) {
            $host = $hosts[\mt_rand(0, 2)];
            $service = $services[\mt_rand(0, 2)];
            [$failures, $successes] = [\mt_rand(0, 5), \mt_rand(0, 9)];
            $host->record($service, $failures, $successes);
            $seen[$host->name][$service]['failures'] = ($seen[$host->name][$service]['failures'] ?? 0) + $failures;
            $seen[$host->name][$service]['successes'] = ($seen[$host->name][$service]['successes'] ?? 0) + $successes;
        }
        $this->waitForSyncs($hosts, $this->nowMs());
        $totals = [];
        foreach ($services as $service) {
            $total = ['failures' => 0, 'successes' => 0];
            foreach ($hosts as $host) {
                $total['failures'] += $seen[$host->name][$service]['failures'] ?? 0;
                $total['successes'] += $seen[$host->name][$service]['successes'] ?? 0;
            }
            $totals[$service] = [$total['failures'], $total['successes'], 0];
        }
        if ($skewed) {
            $exact = function () use ($hosts, $totals): bool {
                foreach ($hosts as $host) {
                    foreach ($totals as $service => $total) {
                        if (\array_values(self::fleetCounts($host, $service) ?? []) !== $total) {
                            return false;
                        }
                    }
                }

                return true;
            };
            $settled = $this->waitUntil($exact, 'every fleet view adds up', 30.0);
            self::report("one host 8 s ahead: every fleet view exact {$settled} ms after the last events' sync");
        }
        foreach ($services as $service) {
            foreach ($hosts as $host) {
                $own = self::own($host, $service) ?? ['failures' => 0, 'successes' => 0, 'rejections' => 0];
                $mine = $seen[$host->name][$service] ?? ['failures' => 0, 'successes' => 0];
                self::assertSame([$mine['failures'], $mine['successes'], 0], [$own['failures'], $own['successes'], $own['rejections']], "{$host->name}'s own counts of {$service}");
                self::assertSame($totals[$service], \array_values(self::fleetCounts($host, $service) ?? []), "{$host->name}'s fleet view of {$service}");
            }
        }
    }

    /**
     * Reports a success and a failure on each host, round after round, for $seconds: the
     * slowest report in ms. Fails if a report is slow enough to have waited on Redis, or if a
     * host's PHP process holds a socket (requests never touch the network).
     *
     * @param list<FleetHost> $hosts
     */
    protected function trafficFor(float $seconds, array $hosts, string $service): float
    {
        $deadline = \microtime(true) + $seconds;

        return $this->trafficWhile(fn () => \microtime(true) < $deadline, $hosts, $service);
    }

    /**
     * As trafficFor(), round after round while $going() holds (asked after each round, every
     * 20 ms or so: it may watch what the round is to show, and fail the test); the slowest
     * report in ms.
     *
     * @param callable(): bool $going
     * @param list<FleetHost> $hosts
     */
    protected function trafficWhile(callable $going, array $hosts, string $service): float
    {
        $slowest = 0.0;
        $other = $service . '.other';
        $round = 0.0;
        do {
            // A round every 50 ms, as many as trafficFor() always made, whatever $going() costs.
            if (\microtime(true) >= $round) {
                foreach ($hosts as $host) {
                    $slowest = \max($slowest, $host->record($other, 1, 1));
                }
                $round = \microtime(true) + 0.05;
            }
            \usleep(20_000);
        } while ($going());
        foreach ($hosts as $host) {
            self::assertSame(0, $host->ask(['op' => 'sockets'])['sockets'], "{$host->name}'s PHP holds no socket");
        }
        // A command timeout of the sidecars is 300 ms: a report that waited on Redis would take it.
        self::assertLessThan(250.0, $slowest, 'no report waits on Redis');

        return $slowest;
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

    /**
     * Of $services, those $host holds slots for (its snapshot lists them, and not as seen only
     * through the fleet).
     *
     * @param list<string> $services
     * @return list<string>
     */
    protected static function heldOf(FleetHost $host, array $services): array
    {
        $rows = $host->snapshot()['snapshot'];

        return \array_values(\array_filter($services, fn (string $service) => isset($rows[$service]) && !($rows[$service]['fleet']['only'] ?? false)));
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
