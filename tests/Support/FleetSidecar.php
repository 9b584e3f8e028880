<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A ganesha-shm-fleet process the tests start, its stderr in a log file.
 */
final class FleetSidecar
{
    /** @var resource|null */
    private $process = null;

    private ?int $exitStatus = null;

    /**
     * @param list<string> $args
     * @param array<string, string> $env more environment (a skewed clock: SkewedClock::env())
     */
    private function __construct(private readonly array $args, public readonly string $log, private readonly array $env)
    {
    }

    /**
     * The sidecar built beside the extension (target/release/ganesha-shm-fleet), or the one named
     * by GANESHA_SHM_FLEET.
     */
    public static function binary(): string
    {
        $env = \getenv('GANESHA_SHM_FLEET');
        $binary = \is_string($env) && $env !== '' ? $env : \dirname(Php::extensionPath()) . '/ganesha-shm-fleet';
        if (!\is_executable($binary)) {
            throw new \RuntimeException("The fleet sidecar {$binary} is not there: cargo build --release builds it (or set GANESHA_SHM_FLEET)");
        }

        return $binary;
    }

    /**
     * @param list<string> $args
     * @param array<string, string> $env more environment (a skewed clock: SkewedClock::env())
     */
    public static function start(array $args, string $log, array $env = []): self
    {
        $sidecar = new self($args, $log, $env);
        $sidecar->run();

        return $sidecar;
    }

    public function run(): void
    {
        $this->exitStatus = null;
        $this->process = \proc_open([self::binary(), ...$this->args], [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $this->log, 'a']], $pipes, null, $this->env === [] ? null : Command::env($this->env));
        if (!\is_resource($this->process)) {
            throw new \RuntimeException('Could not start the fleet sidecar');
        }
    }

    public function pid(): int
    {
        return (int) \proc_get_status($this->process)['pid'];
    }

    /** Its resident memory (VmRSS of /proc/<pid>/status), in kB. */
    public function rssKb(): int
    {
        return ProcFs::statusKb($this->pid(), 'VmRSS');
    }

    /** How many lines of its log hold every one of $texts (read line by line: a flooded log may be large). */
    public function logLines(string ...$texts): int
    {
        $log = @\fopen($this->log, 'r');
        if ($log === false) {
            return 0;
        }
        $count = 0;
        while (($line = \fgets($log)) !== false) {
            $count += (int) \array_reduce($texts, fn (bool $all, string $text) => $all && \str_contains($line, $text), true);
        }
        \fclose($log);

        return $count;
    }

    public function logText(): string
    {
        return (string) @\file_get_contents($this->log);
    }

    /** Sends it $signal (SIGSTOP holds it, as a host stalled, until SIGCONT). */
    public function signal(int $signal): void
    {
        \posix_kill($this->pid(), $signal);
    }

    /** Kills it (SIGKILL), as a crash or the OOM killer would. */
    public function kill(): void
    {
        \posix_kill($this->pid(), \SIGKILL);
        $this->wait();
    }

    /** Stops it with SIGTERM; its exit status. */
    public function stop(): int
    {
        if ($this->process === null) {
            return $this->exitStatus ?? -1;
        }
        \posix_kill($this->pid(), \SIGTERM);

        return $this->wait();
    }

    /** Waits for it to exit (killing it after 10 s); its exit status, -1 when killed. */
    public function wait(): int
    {
        $deadline = \microtime(true) + 10.0;
        while (($status = \proc_get_status($this->process))['running']) {
            if (\microtime(true) > $deadline) {
                \proc_terminate($this->process, 9);
            }
            \usleep(10_000);
        }
        \proc_close($this->process);
        $this->process = null;

        return $this->exitStatus = $status['signaled'] ? -1 : $status['exitcode'];
    }

    public function running(): bool
    {
        return $this->process !== null && \proc_get_status($this->process)['running'];
    }
}
