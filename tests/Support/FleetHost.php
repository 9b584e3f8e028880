<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * One "host" of the fleet tests: its own segment file, a long-lived PHP process in fleet mode
 * answering commands (tests/Fleet/scripts/host.php), and its sidecar.
 */
final class FleetHost
{
    /** @var resource */
    private $process;

    /** @var array<int, resource> */
    private array $pipes;

    public ?FleetSidecar $sidecar = null;

    /**
     * @param array<string, int> $ganesha Ganesha's settings
     * @param array<string, string|int> $ini more settings of its PHP
     * @param array<string, string> $env more environment of its PHP (a skewed clock: SkewedClock::env())
     */
    public function __construct(public readonly string $name, public readonly string $segment, array $ganesha, private readonly string $errors, array $ini = [], array $env = [])
    {
        $settings = [];
        foreach (['ganesha_shm.path' => $segment, 'ganesha_shm.fleet' => 1] + $ini as $setting => $value) {
            \array_push($settings, '-d', $setting . '=' . $value);
        }
        $command = [
            \PHP_BINARY, '-n', '-d', 'display_errors=stderr', '-d', 'error_reporting=-1', '-d', 'extension=' . Php::extensionPath(),
            ...$settings,
            \dirname(__DIR__) . '/Fleet/scripts/host.php', \json_encode($ganesha, \JSON_THROW_ON_ERROR), __DIR__ . '/Autoload.php',
        ];
        $process = \proc_open($command, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $errors, 'a']], $pipes, null, $env === [] ? null : Command::env($env));
        if (!\is_resource($process)) {
            throw new \RuntimeException("Could not start host {$name}");
        }
        $this->process = $process;
        $this->pipes = $pipes;
    }

    /**
     * Sends one command; its answer.
     *
     * @param array<string, mixed> $command
     * @return array<string, mixed>
     */
    public function ask(array $command): array
    {
        \fwrite($this->pipes[0], \json_encode($command, \JSON_THROW_ON_ERROR) . "\n");
        $line = \fgets($this->pipes[1]);
        if ($line === false) {
            throw new \RuntimeException("Host {$this->name} ended: " . @\file_get_contents($this->errors));
        }

        return \json_decode($line, true, 64, \JSON_THROW_ON_ERROR);
    }

    /** Reports failures and successes; the slowest report in ms. */
    public function record(string $service, int $failures, int $successes = 0): float
    {
        return (float) $this->ask(['op' => 'record', 'service' => $service, 'failures' => $failures, 'successes' => $successes])['slowest_ms'];
    }

    public function available(string $service): bool
    {
        return $this->ask(['op' => 'available', 'service' => $service])['available'];
    }

    /** @return array{snapshot: array<string, mixed>, info: array<string, mixed>, now_ms: int} */
    public function snapshot(): array
    {
        return $this->ask(['op' => 'snapshot']);
    }

    /**
     * The events Ganesha emitted on this host so far (its subscribe() callback), as
     * [event, service] pairs: a storage.error is the adapter's StorageException, Ganesha failing open.
     *
     * @return list<array{0: string, 1: string}>
     */
    public function events(): array
    {
        return $this->ask(['op' => 'events'])['events'];
    }

    /**
     * The time (ms of CLOCK_MONOTONIC, PHP's hrtime) of the sidecar's last sync, as the segment
     * shows it; null when the fleet's counts do not decide now.
     */
    public function syncedAtMs(): ?int
    {
        $seen = $this->snapshot();
        $info = $seen['info'];

        return ($info['fleet_attached'] ?? 0) === 1 ? $seen['now_ms'] - $info['fleet_sync_age_ms'] : null;
    }

    public function close(): void
    {
        if ($this->sidecar !== null && $this->sidecar->running()) {
            $this->sidecar->stop();
        }
        $this->stopPhp();
    }

    /** Ends its PHP process, and leaves its sidecar as it is. */
    public function stopPhp(): void
    {
        @\fclose($this->pipes[0]);
        @\fclose($this->pipes[1]);
        \proc_close($this->process);
    }
}
