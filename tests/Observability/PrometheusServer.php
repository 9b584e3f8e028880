<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;

/**
 * Debian's Prometheus on a free port of 127.0.0.1, with a configuration and a data directory
 * of its own in the test's scratch directory, scraping one target every second; stopped by
 * pid in stop(), which the test calls from tearDown, else from the destructor.
 */
final class PrometheusServer
{
    public const BINARY = '/usr/bin/prometheus';
    private const START_TIMEOUT_S = 30.0;

    /** @var resource|null */
    private $process;
    public readonly string $url;

    private function __construct(private readonly string $log, int $port)
    {
        $this->url = 'http://127.0.0.1:' . $port;
    }

    public function __destruct()
    {
        $this->stop();
    }

    public static function missing(): ?string
    {
        return \is_executable(self::BINARY) ? null : 'prometheus is not installed (apt-get install prometheus; .ci/install-deps installs it)';
    }

    /** Starts Prometheus scraping http://$target$metricsPath every second, and waits until it is ready. */
    public static function start(string $scratch, string $target, string $metricsPath = '/metrics'): self
    {
        $port = Loopback::freePort();
        $server = new self($scratch . '/prometheus.log', $port);
        $config = $scratch . '/prometheus.yml';
        \file_put_contents($config, \implode("\n", [
            'global:',
            '  scrape_interval: 1s',
            '  evaluation_interval: 1s',
            'scrape_configs:',
            '  - job_name: ganesha_shm',
            '    metrics_path: ' . \json_encode($metricsPath, \JSON_UNESCAPED_SLASHES),
            '    static_configs:',
            '      - targets: [' . \json_encode($target, \JSON_UNESCAPED_SLASHES) . ']',
            '',
        ]));
        $command = [
            self::BINARY,
            '--config.file=' . $config,
            '--storage.tsdb.path=' . $scratch . '/prometheus-data',
            '--web.listen-address=127.0.0.1:' . $port,
            '--log.level=warn',
        ];
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $server->log, 'a'], 2 => ['file', $server->log, 'a']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $server->process = $process;
        $deadline = \microtime(true) + self::START_TIMEOUT_S;
        while (self::get($server->url . '/-/ready') === null) {
            if (!\proc_get_status($process)['running'] || \microtime(true) > $deadline) {
                $log = (string) @\file_get_contents($server->log);
                $server->stop();
                throw new \RuntimeException("prometheus did not become ready:\n{$log}");
            }
            \usleep(100_000);
        }

        return $server;
    }

    /**
     * The value of an instant query, polled until $accept takes it or $seconds pass: the last
     * value read (null when the query had no result).
     *
     * @param callable(?float): bool $accept
     */
    public function waitFor(string $query, callable $accept, float $seconds = 30.0): ?float
    {
        $deadline = \microtime(true) + $seconds;
        do {
            $value = $this->query($query);
            if ($accept($value)) {
                return $value;
            }
            \usleep(250_000);
        } while (\microtime(true) < $deadline);

        return $value;
    }

    /** The value of an instant query's one result, or null when it has none. */
    public function query(string $query): ?float
    {
        $body = self::get($this->url . '/api/v1/query?query=' . \rawurlencode($query));
        if ($body === null) {
            throw new \RuntimeException("prometheus did not answer {$query}:\n" . @\file_get_contents($this->log));
        }
        $answer = \json_decode($body, true, 512, \JSON_THROW_ON_ERROR);
        if (($answer['status'] ?? '') !== 'success') {
            throw new \RuntimeException("prometheus: {$query}: {$body}");
        }
        $result = $answer['data']['result'] ?? [];
        if (\count($result) > 1) {
            throw new \RuntimeException("prometheus: {$query} has more than one result: {$body}");
        }

        return $result === [] ? null : (float) $result[0]['value'][1];
    }

    public function log(): string
    {
        return (string) @\file_get_contents($this->log);
    }

    /** Ends Prometheus (SIGTERM, then SIGKILL after 10 s) and reaps it. Idempotent. */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        \proc_terminate($this->process, 15);
        $deadline = \microtime(true) + 10.0;
        while (\proc_get_status($this->process)['running'] && \microtime(true) < $deadline) {
            \usleep(50_000);
        }
        if (\proc_get_status($this->process)['running']) {
            \proc_terminate($this->process, 9);
        }
        \proc_close($this->process);
        $this->process = null;
    }

    private static function get(string $url): ?string
    {
        $context = \stream_context_create(['http' => ['timeout' => 5, 'ignore_errors' => true]]);
        $body = @\file_get_contents($url, false, $context);

        return $body === false || !\str_contains($http_response_header[0] ?? '', ' 200 ') ? null : $body;
    }
}
