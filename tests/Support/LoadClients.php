<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Load clients of the web suites running in the background (tests/Fpm/client.php,
 * tests/Apache/client.php: each a `php -n` process sending requests one after the other,
 * LoadClient::run()): each stops after $requests requests, after $seconds seconds, or once
 * stop() is called, whichever comes first; finish() waits for them (bounded) and returns what
 * each counted (LoadResults). Clients still running when the object goes away are killed.
 */
final class LoadClients
{
    private const SIGKILL = 9;

    /** Seconds finish() waits beyond the clients' own time limit before killing them. */
    private const GRACE_S = 60.0;

    /** @var list<array{resource, resource, resource}> proc_open() handle, stdout, stderr */
    private array $running = [];

    private string $dir;

    private float $deadline;

    /**
     * @param string $client the script of the load client, given its job as JSON: $job, with
     *     requests, seconds and stop (the file whose existence tells it to stop)
     * @param array<string, mixed> $job what the client needs to send its requests (port, script, query)
     */
    public function __construct(string $client, array $job, int $clients, ?int $requests, ?float $seconds)
    {
        $this->dir = TempDir::create('ganesha-shm-load-');
        $this->deadline = \microtime(true) + ($seconds ?? 0) + self::GRACE_S;
        $job = \json_encode($job + ['requests' => $requests, 'seconds' => $seconds, 'stop' => $this->dir . '/stop'], \JSON_THROW_ON_ERROR);
        for ($i = 0; $i < $clients; ++$i) {
            $out = \tmpfile();
            $err = \tmpfile();
            $process = \proc_open([\PHP_BINARY, '-n', $client, $job], [0 => ['file', '/dev/null', 'r'], 1 => $out, 2 => $err], $pipes);
            if (!\is_resource($process)) {
                $this->kill();
                throw new \RuntimeException('Could not start a load client');
            }
            $this->running[] = [$process, $out, $err];
        }
    }

    public function __destruct()
    {
        $this->kill();
        TempDir::remove($this->dir);
    }

    /** Tells the clients to stop after their current request. */
    public function stop(): void
    {
        \touch($this->dir . '/stop');
    }

    /**
     * Waits until every client has ended and returns what each counted.
     *
     * @return list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}>
     */
    public function finish(): array
    {
        $results = [];
        $running = $this->running;
        $this->running = [];
        foreach ($running as $i => [$process, $out, $err]) {
            while (\proc_get_status($process)['running']) {
                if (\microtime(true) > $this->deadline) {
                    \proc_terminate($process, self::SIGKILL);
                }
                \usleep(10_000);
            }
            \proc_close($process);
            \rewind($out);
            \rewind($err);
            $stdout = (string) \stream_get_contents($out);
            $stderr = (string) \stream_get_contents($err);
            $result = \json_decode($stdout, true);
            if (!\is_array($result)) {
                throw new \RuntimeException("load client {$i} failed\nstdout: {$stdout}\nstderr: {$stderr}");
            }
            $results[] = $result;
        }

        return $results;
    }

    private function kill(): void
    {
        foreach ($this->running as [$process]) {
            if (\proc_get_status($process)['running']) {
                \proc_terminate($process, self::SIGKILL);
            }
            \proc_close($process);
        }
        $this->running = [];
    }
}
