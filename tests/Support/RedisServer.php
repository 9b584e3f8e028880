<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A redis-server (Debian's) the tests start on a free port of the loopback, with nothing saved
 * to disk, and stop by its pid. It can be stopped for a while (SIGSTOP), killed, and started
 * again on the same port, empty. It can also be another server that speaks Redis's protocol
 * (valkey-server), serve TLS only (RedisTls), require a password, or be a Sentinel
 * (redis-sentinel) watching one.
 */
final class RedisServer
{
    private ?int $pid = null;

    /**
     * @param list<string> $args more arguments of the server
     * @param string|null $config the configuration file of a Sentinel, its one argument
     * @param string|null $password the default user's password (requirepass), which redis-cli gives
     */
    private function __construct(
        public readonly int $port,
        private readonly string $dir,
        private readonly bool $cluster,
        private readonly string $server = 'redis-server',
        private readonly ?RedisTls $tls = null,
        private readonly array $args = [],
        private readonly ?string $config = null,
        private readonly ?string $password = null,
    ) {
    }

    /**
     * Null when $server (redis-server, or valkey-server) is not installed.
     *
     * @param RedisTls|null $tls TLS on its port, and no plain TCP
     * @param list<string> $args more arguments of the server (`--replicaof 127.0.0.1 <port>`)
     * @param string|null $password the default user's password (requirepass), and its master's
     *                              (masterauth): one password for a master and its replicas, as
     *                              Sentinel's auth-pass has it
     */
    public static function start(string $dir, bool $cluster = false, string $server = 'redis-server', ?RedisTls $tls = null, array $args = [], ?string $password = null): ?self
    {
        if (self::binary($server) === null) {
            return null;
        }
        if ($password !== null) {
            \array_push($args, '--requirepass', $password, '--masterauth', $password);
        }
        $started = new self(Loopback::freePort(), $dir, $cluster, $server, $tls, $args, null, $password);
        $started->run();

        return $started;
    }

    /**
     * A redis-sentinel watching $master as the master named $name, which $quorum Sentinels must
     * agree is down before one fails it over: down once it has not answered for $downAfterMs.
     * Its configuration file (which Sentinel rewrites as it learns) is in $dir. It authenticates
     * to the master and its replicas with the master's password, if it has one. With $tls, it
     * serves TLS only, as a redis-server does, and speaks TLS to them and to the other Sentinels
     * (tls-replication), which must all serve it; with $password, it requires that password of
     * its clients and gives it to the other Sentinels, which must all have it. Null when
     * redis-sentinel is not installed.
     */
    public static function sentinel(string $dir, string $name, self $master, int $quorum, int $downAfterMs = 1000, int $failoverTimeoutMs = 3000, ?RedisTls $tls = null, ?string $password = null): ?self
    {
        if (self::binary('redis-sentinel') === null) {
            return null;
        }
        $port = Loopback::freePort();
        $config = "{$dir}/redis-sentinel-{$port}.conf";
        // A redis-server's TLS arguments (`--tls-port P` …) as lines of the file (`tls-port P`).
        $listen = $tls === null ? ["port {$port}"] : [
            ...\array_map(fn (array $pair) => \substr($pair[0], 2) . ' ' . $pair[1], \array_chunk($tls->serverArgs($port), 2)),
            'tls-replication yes',
        ];
        \file_put_contents($config, \implode("\n", [
            ...$listen, 'bind 127.0.0.1', 'daemonize no', "logfile {$dir}/redis-sentinel-{$port}.log", "dir {$dir}",
            ...($password === null ? [] : ["requirepass {$password}"]),
            'sentinel resolve-hostnames no',
            "sentinel monitor {$name} 127.0.0.1 {$master->port} {$quorum}",
            ...($master->password === null ? [] : ["sentinel auth-pass {$name} {$master->password}"]),
            "sentinel down-after-milliseconds {$name} {$downAfterMs}",
            "sentinel failover-timeout {$name} {$failoverTimeoutMs}",
        ]) . "\n");
        $sentinel = new self($port, $dir, false, 'redis-sentinel', $tls, [], $config, $password);
        $sentinel->run();

        return $sentinel;
    }

    public static function binary(string $name): ?string
    {
        return Command::which($name);
    }

    /** Its URL, with its password (`rediss://:PASSWORD@127.0.0.1:PORT`) when it requires one. */
    public function url(): string
    {
        return ($this->tls === null ? 'redis' : 'rediss') . '://' . ($this->password === null ? '' : ":{$this->password}@") . '127.0.0.1:' . $this->port;
    }

    public function pid(): int
    {
        return $this->pid ?? throw new \LogicException("{$this->server} is not running");
    }

    /** Starts it (again) on its port, empty, and waits until it answers. */
    public function run(): void
    {
        $args = $this->config !== null ? [(string) self::binary($this->server), $this->config] : [
            (string) self::binary($this->server),
            ...($this->tls?->serverArgs($this->port) ?? ['--port', (string) $this->port]),
            '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
            '--dir', $this->dir, '--daemonize', 'no', '--logfile', $this->log(),
            ...$this->args,
        ];
        if ($this->cluster) {
            @\unlink($this->dir . "/nodes-{$this->port}.conf");
            \array_push($args, '--cluster-enabled', 'yes', '--cluster-config-file', "nodes-{$this->port}.conf");
        }
        $process = \proc_open(['/bin/sh', '-c', 'exec "$@" </dev/null >/dev/null 2>&1 & echo $!', 'sh', ...$args], [1 => ['pipe', 'w']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException("Could not start {$this->server}");
        }
        $this->pid = (int) \trim((string) \stream_get_contents($pipes[1]));
        \fclose($pipes[1]);
        \proc_close($process);
        $deadline = \microtime(true) + 10.0;
        while ($this->cli(['PING'])['stdout'] !== "PONG\n") {
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException("{$this->server} on port {$this->port} did not answer: " . @\file_get_contents($this->log()));
            }
            \usleep(20_000);
        }
    }

    /**
     * redis-cli against this server (or, with `--cluster create`, the nodes it names), given
     * $timeout seconds: as the default user, with its password if it requires one.
     *
     * @param list<string> $args
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public function cli(array $args, float $timeout = 10.0): array
    {
        $auth = $this->password === null ? [] : ['--no-auth-warning', '-a', $this->password];

        return Command::run([(string) self::binary('redis-cli'), '-h', '127.0.0.1', '-p', (string) $this->port, ...($this->tls?->cliArgs() ?? []), ...$auth, ...$args], timeout: $timeout);
    }

    /** Its log file. */
    public function log(): string
    {
        return "{$this->dir}/{$this->server}-{$this->port}.log";
    }

    public function signal(int $signal): void
    {
        \posix_kill($this->pid(), $signal);
    }

    /** Kills it (SIGKILL) and waits until it is gone. */
    public function kill(): void
    {
        $this->signal(\SIGKILL);
        $this->waitGone();
    }

    /** Stops it (SIGTERM), continuing it first if it was stopped, and waits until it is gone. */
    public function stop(): void
    {
        if ($this->pid === null) {
            return;
        }
        \posix_kill($this->pid, \SIGCONT);
        \posix_kill($this->pid, \SIGTERM);
        $this->waitGone();
    }

    private function waitGone(): void
    {
        $deadline = \microtime(true) + 10.0;
        while ($this->pid !== null && \file_exists("/proc/{$this->pid}") && !\str_contains((string) @\file_get_contents("/proc/{$this->pid}/stat"), ') Z ')) {
            if (\microtime(true) > $deadline) {
                \posix_kill($this->pid, \SIGKILL);
            }
            \usleep(10_000);
        }
        $this->pid = null;
    }
}
