<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Commands of the tests (chromium, composer, the installer, benches/web.sh), run without a shell,
 * with a deadline, and scratch directories removed afterwards.
 */
final class Command
{
    /**
     * @param list<string> $command
     * @param array<string, string>|null $env null: this process's environment
     * @param string|null $input its standard input; null: none (/dev/null)
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public static function run(array $command, ?string $cwd = null, ?array $env = null, float $timeout = 60.0, ?string $input = null): array
    {
        $out = \tmpfile();
        $err = \tmpfile();
        $in = ['file', '/dev/null', 'r'];
        if ($input !== null) {
            $in = \tmpfile();
            \fwrite($in, $input);
            \rewind($in);
        }
        $process = \proc_open($command, [0 => $in, 1 => $out, 2 => $err], $pipes, $cwd, $env);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $deadline = \microtime(true) + $timeout;
        while (($status = \proc_get_status($process))['running']) {
            if (\microtime(true) > $deadline) {
                \proc_terminate($process, 9);
                \proc_close($process);
                throw new \RuntimeException(\sprintf(
                    "Timed out after %.0f s: %s\nstdout: %s\nstderr: %s",
                    $timeout,
                    \implode(' ', $command),
                    self::contents($out),
                    self::contents($err)
                ));
            }
            \usleep(10_000);
        }
        \proc_close($process);

        return ['exit' => $status['exitcode'], 'stdout' => self::contents($out), 'stderr' => self::contents($err)];
    }

    /** The environment of this process with $changes (null values remove a variable). */
    public static function env(array $changes = []): array
    {
        $env = \getenv();
        foreach ($changes as $name => $value) {
            if ($value === null) {
                unset($env[$name]);
            } else {
                $env[$name] = (string) $value;
            }
        }

        return $env;
    }

    public static function which(string $name): ?string
    {
        foreach (\explode(\PATH_SEPARATOR, (string) \getenv('PATH')) as $dir) {
            if ($dir !== '' && \is_file($dir . '/' . $name) && \is_executable($dir . '/' . $name)) {
                return $dir . '/' . $name;
            }
        }

        return null;
    }

    /** @param resource $stream */
    private static function contents($stream): string
    {
        \rewind($stream);
        $contents = \stream_get_contents($stream);
        \fclose($stream);

        return $contents === false ? '' : $contents;
    }
}
