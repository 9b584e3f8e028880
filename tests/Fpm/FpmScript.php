<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

/**
 * What the scripts of tests/Fpm/www share: strict error handling (any notice fails the
 * request with a 500 whose body says why, so that a test never reads a half-right answer),
 * query parameters, the barrier, and the JSON answer, which always says which worker (pid)
 * served the request.
 */
final class FpmScript
{
    /** Seconds a request waits at a barrier for the other parties. */
    private const BARRIER_TIMEOUT_S = 10.0;

    public static function boot(): void
    {
        \set_error_handler(static function (int $severity, string $message, string $file, int $line): bool {
            throw new \ErrorException($message, 0, $severity, $file, $line);
        });
        \set_exception_handler(static function (\Throwable $e): void {
            \http_response_code(500);
            \header('Content-Type: text/plain');
            echo 'worker ', \getmypid(), ': ', $e;
        });
    }

    public static function int(string $name, ?int $default = null): int
    {
        $value = self::optionalInt($name) ?? $default;
        if ($value === null) {
            throw new \InvalidArgumentException("query parameter {$name} is required");
        }

        return $value;
    }

    public static function optionalInt(string $name): ?int
    {
        $value = $_GET[$name] ?? null;
        if ($value === null) {
            return null;
        }
        if (!\is_string($value) || \preg_match('/^-?\d+$/', $value) !== 1) {
            throw new \InvalidArgumentException("query parameter {$name} is not an integer");
        }

        return (int) $value;
    }

    public static function string(string $name): string
    {
        $value = $_GET[$name] ?? null;
        if (!\is_string($value)) {
            throw new \InvalidArgumentException("query parameter {$name} is required");
        }

        return $value;
    }

    /** @return list<string> */
    public static function strings(string $name): array
    {
        $value = $_GET[$name] ?? [];

        return \array_values(\array_map('strval', (array) $value));
    }

    /**
     * With the parameters of FpmServer::barrier(): waits until `parties` requests have
     * reached this point, each marking its arrival with a file named by its pid (and a token
     * of its own, for the threads of one process) in the barrier's directory. The requests then
     * go on at once. With `barrier=harness`, the barrier of tests/Zts/harness.c instead, which
     * holds every thread of the harness's wave.
     */
    public static function barrier(): void
    {
        if (!isset($_GET['barrier'])) {
            return;
        }
        if ($_GET['barrier'] === 'harness') {
            \harness_barrier();

            return;
        }
        $dir = self::string('barrier');
        $parties = self::int('parties');
        \touch($dir . '/' . \getmypid() . '-' . \bin2hex(\random_bytes(4)));
        $deadline = \microtime(true) + self::BARRIER_TIMEOUT_S;
        while (($arrived = \count(\glob($dir . '/*') ?: [])) < $parties) {
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException(\sprintf('barrier: %d of %d requests arrived in %.0f s', $arrived, $parties, self::BARRIER_TIMEOUT_S));
            }
            \usleep(200);
        }
    }

    /**
     * Answers $data as JSON, with the pid of the worker.
     *
     * @param array<string, mixed> $data
     */
    public static function respond(array $data): void
    {
        \header('Content-Type: application/json');
        echo \json_encode(['pid' => \getmypid()] + $data, \JSON_THROW_ON_ERROR);
    }

    /**
     * Runs $call; with catch=1 in the query, returns what it threw instead of failing the
     * request: [class, message], or null when it threw nothing.
     *
     * @return array{0: class-string, 1: string}|null
     */
    public static function caught(callable $call): ?array
    {
        if (!isset($_GET['catch'])) {
            $call();

            return null;
        }
        try {
            $call();
        } catch (\Throwable $e) {
            return [\get_class($e), $e->getMessage()];
        }

        return null;
    }
}
