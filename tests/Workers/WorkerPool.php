<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Workers;

use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * RoadRunner's process model, for the workers suite: a supervisor (this process) that starts N
 * worker processes, each `php -n -d extension=… worker.php` exec'd on its own by proc_open()
 * (no shell, no PHP parent forking it: each runs its own PHP startup, so each makes its own
 * segment unless `ganesha_shm.path` names a file), relays requests to them over their pipes as
 * line-delimited JSON, and replaces a worker that dies, as RoadRunner's pool does.
 *
 * Requests are spread round-robin: each worker is given its whole batch before any answer is
 * read, so the workers serve their batches at the same time. A batch stays well under the 64 KiB
 * of a pipe, so that neither side blocks writing while the other does.
 */
final class WorkerPool
{
    /** Seconds the supervisor waits for a worker's line before it gives up on it. */
    private const TIMEOUT_S = 20.0;

    private const SIGKILL = 9;

    /** @var array<int, array{process: resource, stdin: resource, stdout: resource, pid: int, segment: string}> */
    private array $workers = [];

    /**
     * Starts $size workers and waits (bounded) until each has booted.
     *
     * @param array{timeWindow: int, failureRateThreshold: int, minimumRequests: int, intervalToHalfOpen: int} $ganesha
     *     the settings of the Builder every worker builds its Ganesha with
     * @param string|null $segment `ganesha_shm.path` of every worker; null: none (anonymous segments)
     * @param string $errors the file the workers' stderr goes to
     */
    public function __construct(int $size, private readonly array $ganesha, private readonly ?string $segment, private readonly string $errors)
    {
        for ($worker = 0; $worker < $size; ++$worker) {
            $this->workers[$worker] = $this->spawn();
        }
        foreach ($this->workers as $worker => $process) {
            $this->workers[$worker] += $this->booted($worker);
        }
    }

    public function __destruct()
    {
        $this->stop();
    }

    public function size(): int
    {
        return \count($this->workers);
    }

    public function pid(int $worker): int
    {
        return $this->workers[$worker]['pid'];
    }

    /** What ganesha_shm_info() of worker $worker calls its segment: 'anonymous', or the path. */
    public function segment(int $worker): string
    {
        return $this->workers[$worker]['segment'];
    }

    /**
     * Sends one request to worker $worker and returns its answer.
     *
     * @param array{op: string, service: string} $request
     * @return array<string, mixed>
     */
    public function ask(int $worker, array $request): array
    {
        \fwrite($this->workers[$worker]['stdin'], \json_encode($request, \JSON_THROW_ON_ERROR) . "\n");

        return $this->answer($worker);
    }

    /**
     * Sends request $i of $requests to worker $i % size, every worker its batch at once, and
     * returns the answers in the order of the requests.
     *
     * @param list<array{op: string, service: string}> $requests
     * @return list<array<string, mixed>> each with the pid of the worker that served it
     */
    public function dispatch(array $requests): array
    {
        $batches = [];
        foreach ($requests as $i => $request) {
            $batches[$i % $this->size()][] = $i;
        }
        foreach ($batches as $worker => $batch) {
            $lines = '';
            foreach ($batch as $i) {
                $lines .= \json_encode($requests[$i], \JSON_THROW_ON_ERROR) . "\n";
            }
            \fwrite($this->workers[$worker]['stdin'], $lines);
        }
        $answers = [];
        foreach ($batches as $worker => $batch) {
            foreach ($batch as $i) {
                $answers[$i] = $this->answer($worker);
            }
        }
        \ksort($answers);

        return $answers;
    }

    /**
     * Sends the same request to every worker at once; the answers, by worker.
     *
     * @param array{op: string, service: string} $request
     * @return list<array<string, mixed>>
     */
    public function everyWorker(array $request): array
    {
        return $this->dispatch(\array_fill(0, $this->size(), $request));
    }

    /**
     * SIGKILLs worker $worker, as a crash or the OOM killer would end it, and starts its
     * replacement in its place, as RoadRunner does; returns the new worker's pid.
     */
    public function killAndReplace(int $worker): int
    {
        $old = $this->workers[$worker];
        \proc_terminate($old['process'], self::SIGKILL);
        $this->close($old);
        $this->workers[$worker] = $this->spawn();
        $this->workers[$worker] += $this->booted($worker);

        return $this->pid($worker);
    }

    /**
     * Ends every worker: their stdin closed, as RoadRunner stops a pool, then a SIGKILL for any
     * still running after a second. Idempotent.
     */
    public function stop(): void
    {
        $workers = $this->workers;
        $this->workers = [];
        foreach ($workers as $worker) {
            \fclose($worker['stdin']);
        }
        $deadline = \microtime(true) + 1.0;
        foreach ($workers as $worker) {
            while (\proc_get_status($worker['process'])['running'] && \microtime(true) < $deadline) {
                \usleep(5_000);
            }
            if (\proc_get_status($worker['process'])['running']) {
                \proc_terminate($worker['process'], self::SIGKILL);
            }
            $this->close($worker);
        }
    }

    /** @return array{process: resource, stdin: resource, stdout: resource, pid: int} */
    private function spawn(): array
    {
        $command = [\PHP_BINARY, '-n', '-d', 'display_errors=stderr', '-d', 'error_reporting=-1', '-d', 'extension=' . Php::extensionPath()];
        if ($this->segment !== null) {
            \array_push($command, '-d', 'ganesha_shm.path=' . $this->segment);
        }
        \array_push($command, __DIR__ . '/worker.php', \json_encode($this->ganesha, \JSON_THROW_ON_ERROR));
        $process = \proc_open($command, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $this->errors, 'a']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }

        return ['process' => $process, 'stdin' => $pipes[0], 'stdout' => $pipes[1], 'pid' => \proc_get_status($process)['pid']];
    }

    /**
     * Reads worker $worker's first line, which says it booted and which segment it mapped.
     *
     * @return array{segment: string}
     */
    private function booted(int $worker): array
    {
        $ready = $this->answer($worker);
        if (($ready['ready'] ?? false) !== true || $ready['pid'] !== $this->pid($worker)) {
            throw new \RuntimeException("Worker {$worker} did not boot: " . \json_encode($ready));
        }

        return ['segment' => $ready['segment']];
    }

    /**
     * The next line worker $worker answered, decoded; fails with the workers' stderr when the
     * worker ended or stayed silent for TIMEOUT_S.
     *
     * @return array<string, mixed>
     */
    private function answer(int $worker): array
    {
        $stdout = $this->workers[$worker]['stdout'];
        $read = [$stdout];
        $write = $except = null;
        $line = \stream_select($read, $write, $except, (int) self::TIMEOUT_S) === 1 ? \fgets($stdout) : false;
        if ($line === false) {
            throw new \RuntimeException(\sprintf(
                "Worker %d (pid %d) gave no answer: %s\n%s",
                $worker,
                $this->workers[$worker]['pid'],
                \feof($stdout) ? 'it ended' : 'timed out',
                @\file_get_contents($this->errors)
            ));
        }

        return \json_decode($line, true, 16, \JSON_THROW_ON_ERROR);
    }

    /** @param array{process: resource, stdin: resource, stdout: resource} $worker */
    private function close(array $worker): void
    {
        foreach ([$worker['stdin'], $worker['stdout']] as $pipe) {
            if (\is_resource($pipe)) {
                \fclose($pipe);
            }
        }
        \proc_close($worker['process']);
    }
}
