<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A TCP proxy on the loopback, between a fleet sidecar and a redis-server, that can hold what
 * its clients send and deliver it later: a request the sidecar sent just before a network
 * partition, reaching Redis only after the partition healed, after the sidecar reconnected and
 * published again. It is a separate PHP process (tests/Support/holding_proxy.php), so that it
 * forwards while the test process waits, listening on a port of 127.0.0.1 the system picks; for
 * each connection it accepts it opens one to 127.0.0.1:<target port> and forwards bytes both
 * ways.
 *
 * hold() applies to the connections open when it is called: connections accepted later
 * (the sidecar reconnecting) are forwarded at once, as through a healed network. The test
 * controls it through its stdin and stdout, one command a line and one answer a line, each
 * awaited with a deadline; it ends by itself when its stdin closes (the test process died).
 * It logs to holding-proxy.log in the test's directory only when something goes wrong.
 */
final class HoldingProxy
{
    /** How long an answer of the proxy may take, in seconds. */
    private const TIMEOUT_S = 5.0;

    /** @var resource|null */
    private $process;

    /** @var array<int, resource> its stdin (commands) and stdout (answers) */
    private array $pipes;

    /** What was read of its stdout and is not an answer yet. */
    private string $answers = '';

    private int $port = 0;

    /** @param resource $process @param array<int, resource> $pipes */
    private function __construct($process, array $pipes, private readonly int $targetPort, public readonly string $log)
    {
        $this->process = $process;
        $this->pipes = $pipes;
    }

    /** Starts a proxy to 127.0.0.1:$targetPort, its log in $dir; returns once it listens. */
    public static function start(string $dir, int $targetPort): self
    {
        $log = "{$dir}/holding-proxy.log";
        $command = [\PHP_BINARY, '-n', '-d', 'display_errors=stderr', '-d', 'error_reporting=-1', __DIR__ . '/holding_proxy.php', (string) $targetPort];
        $process = \proc_open($command, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $log, 'a']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException("Could not start the holding proxy to port {$targetPort}");
        }
        \stream_set_blocking($pipes[1], false);
        $proxy = new self($process, $pipes, $targetPort, $log);
        try {
            $proxy->port = (int) $proxy->answer('its port');
        } catch (\Throwable $e) {
            $proxy->stop();

            throw $e;
        }

        return $proxy;
    }

    public function port(): int
    {
        return $this->port;
    }

    /** Its URL, for the sidecar: `redis://127.0.0.1:PORT`. */
    public function url(): string
    {
        return 'redis://127.0.0.1:' . $this->port;
    }

    public function pid(): int
    {
        if ($this->process === null) {
            throw new \LogicException('The holding proxy is not running');
        }

        return (int) \proc_get_status($this->process)['pid'];
    }

    /**
     * From now on, what the clients of the connections open now send is held, instead of
     * forwarded (what the server sends them still flows); in effect when this returns.
     * Connections accepted later are forwarded as usual.
     */
    public function hold(): void
    {
        $this->ask('hold');
    }

    /**
     * Closes the client side of every connection open now (its client sees it closed), keeping
     * their server side open and what they held. Connections accepted later work as usual.
     */
    public function cut(): void
    {
        $this->ask('cut');
    }

    /**
     * Writes every held byte to the server side of its connection, in order (also for those
     * whose client was cut, whose answers are read and dropped), and ends holding. Returns once
     * the proxy wrote them all to the server's socket: the server may not have handled them yet.
     * Fails if a server closed a connection before its held bytes could be written.
     */
    public function release(): void
    {
        $this->ask('release');
    }

    /**
     * Writes the bytes of the last release again, each connection's on a new connection to the
     * server, whose answers are dropped: a request delivered twice. Returns once they are written.
     */
    public function replay(): int
    {
        return (int) $this->ask('replay');
    }

    /** How many bytes are held now, across connections. */
    public function heldBytes(): int
    {
        return (int) $this->ask('held');
    }

    /**
     * Waits until at least $bytes are held (a request was caught); how many are. Fails after
     * $timeout seconds.
     */
    public function awaitHeld(int $bytes = 1, float $timeout = self::TIMEOUT_S): int
    {
        $deadline = \microtime(true) + $timeout;
        while (($held = $this->heldBytes()) < $bytes) {
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException(\sprintf('The holding proxy to port %d held %d bytes, not %d, after %.1f s', $this->targetPort, $held, $bytes, $timeout));
            }
            \usleep(10_000);
        }

        return $held;
    }

    /** Kills it (SIGKILL, by its pid) and waits until it is gone; its connections close with it. */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        foreach ($this->pipes as $pipe) {
            @\fclose($pipe);
        }
        $this->pipes = [];
        $pid = (int) \proc_get_status($this->process)['pid'];
        if (\proc_get_status($this->process)['running']) {
            \posix_kill($pid, 9);
        }
        $deadline = \microtime(true) + 10.0;
        while (\proc_get_status($this->process)['running']) {
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException("The holding proxy (pid {$pid}) did not end after SIGKILL");
            }
            \usleep(10_000);
        }
        \proc_close($this->process);
        $this->process = null;
    }

    public function __destruct()
    {
        $this->stop();
    }

    /** Sends $command; what its answer says after "ok". */
    private function ask(string $command): string
    {
        if ($this->process === null) {
            throw new \LogicException("The holding proxy is not running: cannot {$command}");
        }
        if (@\fwrite($this->pipes[0], $command . "\n") === false) {
            throw new \RuntimeException("The holding proxy to port {$this->targetPort} did not take the command {$command}: it ended" . $this->logged());
        }

        return $this->answer("an answer to {$command}", $command);
    }

    /**
     * The next answer line, awaited until the deadline; what it says after "ok". An answer that
     * is late would be taken for the next one: the proxy is stopped then.
     */
    private function answer(string $what, ?string $command = null): string
    {
        $deadline = \microtime(true) + self::TIMEOUT_S;
        while (($end = \strpos($this->answers, "\n")) === false) {
            $left = $deadline - \microtime(true);
            if ($left <= 0) {
                $this->stop();

                throw new \RuntimeException(\sprintf('The holding proxy to port %d did not give %s within %.0f s (it is stopped now)', $this->targetPort, $what, self::TIMEOUT_S) . $this->logged());
            }
            $read = [$this->pipes[1]];
            $write = $except = null;
            if (@\stream_select($read, $write, $except, (int) $left, (int) (($left - (int) $left) * 1e6)) === false) {
                continue;
            }
            if ($read === []) {
                continue;
            }
            $chunk = \fread($this->pipes[1], 8192);
            if ($chunk === false || ($chunk === '' && \feof($this->pipes[1]))) {
                throw new \RuntimeException("The holding proxy to port {$this->targetPort} ended instead of giving {$what}" . $this->logged());
            }
            $this->answers .= $chunk;
        }
        $line = \substr($this->answers, 0, $end);
        $this->answers = \substr($this->answers, $end + 1);
        if ($line !== 'ok' && !\str_starts_with($line, 'ok ')) {
            throw new \RuntimeException($command === null
                ? "The holding proxy to port {$this->targetPort} gave {$line} instead of {$what}"
                : "The holding proxy to port {$this->targetPort} failed to {$command}: {$line}");
        }

        return \substr($line, 3);
    }

    /** What its log says, if anything, to end a failure's message. */
    private function logged(): string
    {
        $log = \trim((string) @\file_get_contents($this->log));

        return $log === '' ? '' : ": {$log}";
    }
}
