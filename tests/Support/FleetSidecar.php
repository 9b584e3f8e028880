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

    /** @param list<string> $args */
    private function __construct(private readonly array $args, public readonly string $log)
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

    /** @param list<string> $args */
    public static function start(array $args, string $log): self
    {
        $sidecar = new self($args, $log);
        $sidecar->run();

        return $sidecar;
    }

    public function run(): void
    {
        $this->exitStatus = null;
        $this->process = \proc_open([self::binary(), ...$this->args], [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $this->log, 'a']], $pipes);
        if (!\is_resource($this->process)) {
            throw new \RuntimeException('Could not start the fleet sidecar');
        }
    }

    public function pid(): int
    {
        return (int) \proc_get_status($this->process)['pid'];
    }

    public function logText(): string
    {
        return (string) @\file_get_contents($this->log);
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
