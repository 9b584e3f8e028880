<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;

/**
 * The service the middleware suite's HTTP calls go to: PHP's built-in server on a free port of
 * 127.0.0.1, routing every request to upstream.php, which answers the status the test set
 * (answerWith()) and counts the requests it got (requests()). Started as a child of this
 * process (proc_open, no shell), stopped by stop().
 */
final class Upstream
{
    private const START_TIMEOUT_S = 10.0;

    /** @var resource|null */
    private $process;

    private function __construct(public readonly string $dir, public readonly int $port)
    {
    }

    public function __destruct()
    {
        $this->stop();
    }

    /** Starts the server, serving from $dir (a directory of the test's own), and waits until it listens. */
    public static function start(string $dir): self
    {
        $upstream = new self($dir, Loopback::freePort());
        $command = [\PHP_BINARY, '-n', '-S', '127.0.0.1:' . $upstream->port, '-t', $dir, __DIR__ . '/upstream.php'];
        $log = $dir . '/server.log';
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $upstream->process = $process;
        $deadline = \microtime(true) + self::START_TIMEOUT_S;
        while (($socket = @\stream_socket_client('tcp://127.0.0.1:' . $upstream->port, $errno, $error, 0.2)) === false) {
            if (!\proc_get_status($process)['running'] || \microtime(true) > $deadline) {
                $upstream->stop();
                throw new \RuntimeException("The upstream did not start listening on port {$upstream->port}: " . @\file_get_contents($log));
            }
            \usleep(20_000);
        }
        \fclose($socket);

        return $upstream;
    }

    /** http://127.0.0.1:PORT$path */
    public function url(string $path = '/'): string
    {
        return 'http://127.0.0.1:' . $this->port . $path;
    }

    /** Sets the status of every answer from now on (written whole, then renamed in place). */
    public function answerWith(int $status): void
    {
        \file_put_contents($this->dir . '/status.tmp', (string) $status);
        \rename($this->dir . '/status.tmp', $this->dir . '/status');
    }

    /** How many requests reached the upstream so far. */
    public function requests(): int
    {
        $log = @\file_get_contents($this->dir . '/requests');

        return $log === false ? 0 : \substr_count($log, "\n");
    }

    /** Ends the server (SIGTERM, then SIGKILL after 2 s). Idempotent. */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        $process = $this->process;
        $this->process = null;
        \proc_terminate($process);
        $deadline = \microtime(true) + 2.0;
        while (\proc_get_status($process)['running'] && \microtime(true) < $deadline) {
            \usleep(10_000);
        }
        if (\proc_get_status($process)['running']) {
            \proc_terminate($process, 9);
        }
        \proc_close($process);
    }
}
