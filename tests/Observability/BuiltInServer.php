<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * `php -S 127.0.0.1:<free port>` serving examples/status (with its router, so /metrics runs
 * examples/metrics.php, wrapped by www/router.php for `hold_ms`), the extension loaded at
 * startup and PHP_CLI_SERVER_WORKERS=2: the
 * server forks its workers after the extension created its segment, so every request shares
 * one store, as the workers of one php-fpm master do.
 *
 * Started in a session of its own (setsid) so that stop() ends the workers too: killing the
 * server's parent process alone leaves its workers running.
 */
final class BuiltInServer
{
    private const START_TIMEOUT_S = 10.0;
    private const SIGTERM = 15;
    private const SIGKILL = 9;

    /** @var resource|null */
    private $process;
    private int $pid = 0;
    private bool $ownSession = false;
    public readonly string $url;

    private function __construct(private readonly string $log, int $port)
    {
        $this->url = 'http://127.0.0.1:' . $port;
    }

    /**
     * Starts the server and waits (bounded) until it answers.
     *
     * @param array<string, string> $ini more -d settings (ganesha_shm.path, for one)
     * @param int|null $port the port to listen on (that of a server stopped before); null: a free one
     */
    public static function start(string $scratch, array $ini = [], ?int $port = null): self
    {
        $root = \dirname(__DIR__, 2);
        $port ??= Loopback::freePort();
        $server = new self($scratch . '/server.log', $port);

        $command = [
            \PHP_BINARY, '-n',
            '-d', 'extension=' . Php::extensionPath(),
            '-d', 'display_errors=stderr',
            '-d', 'log_errors=0',
            '-d', 'error_reporting=-1',
            ...\array_merge(...\array_map(static fn (string $name, string $value): array => ['-d', "{$name}={$value}"], \array_keys($ini), $ini)),
            '-S', '127.0.0.1:' . $port,
            '-t', $root . '/examples/status',
            __DIR__ . '/www/router.php',
        ];
        if (\is_executable('/usr/bin/setsid')) {
            \array_unshift($command, '/usr/bin/setsid');
            $server->ownSession = true;
        }
        // GANESHA_DIR (where tests/autoload.php finds Ganesha without vendor/) passes through.
        $env = Command::env(['PHP_CLI_SERVER_WORKERS' => '2', 'GANESHA_STATUS_DEMO' => '1']);
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $server->log, 'a'], 2 => ['file', $server->log, 'a']], $pipes, $root, $env);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $server->process = $process;
        $server->pid = \proc_get_status($process)['pid'];

        $deadline = \microtime(true) + self::START_TIMEOUT_S;
        while (true) {
            if (!\proc_get_status($process)['running']) {
                $log = $server->log();
                $server->stop();
                throw new \RuntimeException("php -S exited at startup:\n{$log}");
            }
            $socket = @\stream_socket_client('tcp://127.0.0.1:' . $port, $errno, $error, 0.2);
            if ($socket !== false) {
                \fclose($socket);
                break;
            }
            if (\microtime(true) > $deadline) {
                $log = $server->log();
                $server->stop();
                throw new \RuntimeException(\sprintf("php -S did not answer within %.0f s:\n%s", self::START_TIMEOUT_S, $log));
            }
            \usleep(50_000);
        }

        return $server;
    }

    /**
     * GET $path (with its query string).
     *
     * @return array{status: int, headers: array<string, string>, body: string}
     */
    public function get(string $path): array
    {
        $context = \stream_context_create(['http' => ['timeout' => 10, 'ignore_errors' => true, 'header' => "Connection: close\r\n"]]);
        $body = @\file_get_contents($this->url . $path, false, $context);
        $lines = $http_response_header ?? [];
        if ($body === false || $lines === []) {
            throw new \RuntimeException("GET {$path} failed\nserver log:\n" . $this->log());
        }
        \preg_match('{^HTTP/\S+ (\d{3})}', $lines[0], $m);
        $headers = [];
        foreach (\array_slice($lines, 1) as $line) {
            [$name, $value] = \array_map('trim', \explode(':', $line, 2)) + [1 => ''];
            $headers[\strtolower($name)] = $value;
        }

        return ['status' => (int) ($m[1] ?? 0), 'headers' => $headers, 'body' => $body];
    }

    /**
     * Sends GET $path now and returns what reads its answer later, as json() would: for a
     * request that is to be under way while others are sent.
     *
     * @return \Closure(): array<string, mixed>
     */
    public function jsonLater(string $path): \Closure
    {
        $socket = \stream_socket_client(\substr($this->url, \strlen('http://')), $errno, $error, 5.0);
        if ($socket === false) {
            throw new \RuntimeException("GET {$path}: cannot connect: {$error}");
        }
        \fwrite($socket, "GET {$path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");

        return function () use ($socket, $path): array {
            \stream_set_timeout($socket, 10);
            $response = (string) \stream_get_contents($socket);
            \fclose($socket);
            [$head, $body] = \explode("\r\n\r\n", $response, 2) + [1 => ''];
            if (\preg_match('{^HTTP/\S+ 200 }', $head) !== 1) {
                throw new \RuntimeException("GET {$path}: {$head}\n{$body}\nserver log:\n" . $this->log());
            }

            return \json_decode($body, true, 512, \JSON_THROW_ON_ERROR);
        };
    }

    /**
     * GET $path and decode its JSON; fails unless it answered 200.
     *
     * @return array<string, mixed>
     */
    public function json(string $path): array
    {
        $response = $this->get($path);
        if ($response['status'] !== 200) {
            throw new \RuntimeException("GET {$path}: {$response['status']}\n{$response['body']}\nserver log:\n" . $this->log());
        }

        return \json_decode($response['body'], true, 512, \JSON_THROW_ON_ERROR);
    }

    public function log(): string
    {
        return (string) @\file_get_contents($this->log);
    }

    /** Ends the server and its workers, then reaps it. Idempotent. */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        $children = self::childrenOf($this->pid);
        if ($this->ownSession) {
            @\posix_kill(-$this->pid, self::SIGTERM);
        }
        \proc_terminate($this->process, self::SIGTERM);
        foreach ($children as $child) {
            @\posix_kill($child, self::SIGTERM);
        }
        $deadline = \microtime(true) + 3.0;
        while (\proc_get_status($this->process)['running'] && \microtime(true) < $deadline) {
            \usleep(20_000);
        }
        if (\proc_get_status($this->process)['running']) {
            \proc_terminate($this->process, self::SIGKILL);
        }
        foreach ($children as $child) {
            if (@\posix_kill($child, 0)) {
                @\posix_kill($child, self::SIGKILL);
            }
        }
        if ($this->ownSession) {
            @\posix_kill(-$this->pid, self::SIGKILL);
        }
        \proc_close($this->process);
        $this->process = null;
        // Until the workers are gone too, one of them may still hold the listening socket: a
        // server started next on the same port would be taken for ready while the old worker
        // accepts its first request and closes it unanswered.
        $deadline = \microtime(true) + 5.0;
        while (\microtime(true) < $deadline && \array_filter($children, static fn (int $child): bool => self::alive($child)) !== []) {
            \usleep(20_000);
        }
    }

    /** Whether $pid is a process that has not ended (a zombie has). */
    private static function alive(int $pid): bool
    {
        $stat = @\file_get_contents("/proc/{$pid}/stat");

        return $stat !== false && \preg_match('/\) [^Z] /', (string) \strrchr($stat, ')')) === 1;
    }

    /** @return list<int> pids whose parent is $pid (Linux /proc) */
    private static function childrenOf(int $pid): array
    {
        $children = [];
        foreach (\glob('/proc/[0-9]*/stat') ?: [] as $stat) {
            $line = @\file_get_contents($stat);
            // pid (comm) state ppid ...; comm may hold spaces and parentheses
            if ($line !== false && \preg_match('/\) \S (\d+) /', (string) \strrchr($line, ')') ?: '', $m) === 1 && (int) $m[1] === $pid) {
                $children[] = (int) \basename(\dirname($stat));
            }
        }

        return $children;
    }
}
