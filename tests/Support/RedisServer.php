<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A redis-server (Debian's) the tests start on a free port of the loopback, with nothing saved
 * to disk, and stop by its pid. It can be stopped for a while (SIGSTOP), killed, and started
 * again on the same port, empty.
 */
final class RedisServer
{
    private ?int $pid = null;

    private function __construct(
        public readonly int $port,
        private readonly string $dir,
        private readonly bool $cluster,
    ) {
    }

    /** Null when redis-server is not installed. */
    public static function start(string $dir, bool $cluster = false): ?self
    {
        if (self::binary('redis-server') === null) {
            return null;
        }
        $server = new self(Loopback::freePort(), $dir, $cluster);
        $server->run();

        return $server;
    }

    public static function binary(string $name): ?string
    {
        return Command::which($name);
    }

    public function url(): string
    {
        return 'redis://127.0.0.1:' . $this->port;
    }

    public function pid(): int
    {
        return $this->pid ?? throw new \LogicException('redis-server is not running');
    }

    /** Starts it (again) on its port, empty, and waits until it answers. */
    public function run(): void
    {
        $args = [
            (string) self::binary('redis-server'),
            '--port', (string) $this->port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
            '--dir', $this->dir, '--daemonize', 'no', '--logfile', $this->dir . "/redis-{$this->port}.log",
        ];
        if ($this->cluster) {
            @\unlink($this->dir . "/nodes-{$this->port}.conf");
            \array_push($args, '--cluster-enabled', 'yes', '--cluster-config-file', "nodes-{$this->port}.conf");
        }
        $process = \proc_open(['/bin/sh', '-c', 'exec "$@" </dev/null >/dev/null 2>&1 & echo $!', 'sh', ...$args], [1 => ['pipe', 'w']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start redis-server');
        }
        $this->pid = (int) \trim((string) \stream_get_contents($pipes[1]));
        \fclose($pipes[1]);
        \proc_close($process);
        $deadline = \microtime(true) + 10.0;
        while ($this->cli(['PING'])['stdout'] !== "PONG\n") {
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException("redis-server on port {$this->port} did not answer: " . @\file_get_contents($this->dir . "/redis-{$this->port}.log"));
            }
            \usleep(20_000);
        }
    }

    /**
     * redis-cli against this server.
     *
     * @param list<string> $args
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public function cli(array $args): array
    {
        return Command::run([(string) self::binary('redis-cli'), '-h', '127.0.0.1', '-p', (string) $this->port, ...$args], timeout: 10.0);
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
