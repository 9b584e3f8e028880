<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Child PHP processes: `php -n` (no php.ini, so nothing but what a test asks for is loaded),
 * with or without the extension, running a snippet of code.
 */
final class Php
{
    private const TIMEOUT_S = 30.0;

    /**
     * Absolute path of the extension: the GANESHA_SHM_EXT constant set by tests/bootstrap.php
     * (from the environment variable of that name, else the object mapped in this process).
     */
    public static function extensionPath(): string
    {
        $path = \defined('GANESHA_SHM_EXT') ? (string) \constant('GANESHA_SHM_EXT') : self::findExtension();
        if (!\is_file($path)) {
            throw new \RuntimeException(
                "The ganesha_shm extension to load in child processes, {$path}, does not exist: set GANESHA_SHM_EXT=/abs/path/libganesha_shm.so"
            );
        }

        return $path;
    }

    /**
     * The path of the extension: environment variable GANESHA_SHM_EXT, else the shared object
     * this process mapped (Linux), else target/release/libganesha_shm.so of this package.
     */
    public static function findExtension(): string
    {
        $env = \getenv('GANESHA_SHM_EXT');
        if (\is_string($env) && $env !== '') {
            return $env;
        }
        $maps = @\file_get_contents('/proc/self/maps');
        if (\is_string($maps)) {
            foreach (\explode("\n", $maps) as $line) {
                $fields = \preg_split('/\s+/', \trim($line), 6);
                $file = $fields[5] ?? '';
                if ($file !== '' && \preg_match('/ganesha_shm[^\/]*\.so$/', $file) === 1) {
                    return $file;
                }
            }
        }

        return \dirname(__DIR__, 2) . '/target/release/libganesha_shm.so';
    }

    /**
     * Runs $code (PHP without the opening tag) in `php -n` with the extension loaded.
     *
     * @param array<string, string|int> $ini more -d settings
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public static function withExtension(string $code, array $ini = []): array
    {
        return self::run($code, ['extension' => self::extensionPath()] + $ini);
    }

    /**
     * Runs $code (PHP without the opening tag) in `php -n`, without the extension.
     *
     * @param array<string, string|int> $ini -d settings
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public static function withoutExtension(string $code, array $ini = []): array
    {
        return self::run($code, $ini);
    }

    /**
     * @param array<string, string|int> $ini -d settings
     * @param list<string> $args arguments replacing `-r $code`
     * @return array{exit: int, stdout: string, stderr: string}
     */
    public static function run(string $code, array $ini = [], ?array $args = null): array
    {
        $command = [\PHP_BINARY, '-n', '-d', 'display_errors=stderr', '-d', 'error_reporting=-1'];
        foreach ($ini as $name => $value) {
            $command[] = '-d';
            $command[] = $name . '=' . $value;
        }
        \array_push($command, ...($args ?? ['-r', $code]));

        $out = \tmpfile();
        $err = \tmpfile();
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => $out, 2 => $err], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $deadline = \microtime(true) + self::TIMEOUT_S;
        while (($status = \proc_get_status($process))['running']) {
            if (\microtime(true) > $deadline) {
                \proc_terminate($process, 9);
                \proc_close($process);
                throw new \RuntimeException('Child process timed out: ' . \implode(' ', $command));
            }
            \usleep(2_000);
        }
        \proc_close($process);

        return [
            'exit' => $status['exitcode'],
            'stdout' => self::contents($out),
            'stderr' => self::contents($err),
        ];
    }

    /**
     * Runs $code with the extension and decodes the JSON it printed; fails unless it exits with 0.
     *
     * @param array<string, string|int> $ini
     * @return array<mixed>
     */
    public static function json(string $code, array $ini = [], bool $extension = true): array
    {
        $result = $extension ? self::withExtension($code, $ini) : self::withoutExtension($code, $ini);
        if ($result['exit'] !== 0) {
            throw new \RuntimeException(\sprintf(
                "Child process exited with %d\nstdout: %s\nstderr: %s",
                $result['exit'],
                $result['stdout'],
                $result['stderr']
            ));
        }

        return \json_decode($result['stdout'], true, 512, \JSON_THROW_ON_ERROR);
    }

    /**
     * PHP code that loads this package's autoloaders in a child process: without Ganesha
     * (so that the extension throws RuntimeException, not Ganesha's StorageException), or
     * with Ganesha, exiting with status 3 when it is not loadable.
     */
    public static function autoloadCode(bool $ganesha = false): string
    {
        return \sprintf(
            'require %s; $missing = \\%s::register(%s);%s',
            \var_export(__DIR__ . '/Autoload.php', true),
            Autoload::class,
            $ganesha ? 'true' : 'false',
            $ganesha ? ' if ($missing !== null) { fwrite(STDERR, $missing); exit(3); }' : ''
        );
    }

    /**
     * Ends a pcntl_fork() child of the PHPUnit process with exit status $status, without
     * running PHPUnit's shutdown code: the process image is replaced by `sh -c 'exit N'`
     * (quick to start, for tests that fork many children), else by `php -n -r exit(N);`.
     */
    public static function endForkedChild(int $status): never
    {
        if (\is_executable('/bin/sh')) {
            @\pcntl_exec('/bin/sh', ['-c', 'exit ' . $status]);
        }
        @\pcntl_exec(\PHP_BINARY, ['-n', '-r', 'exit(' . $status . ');']);
        \posix_kill(\posix_getpid(), \SIGKILL);
        exit($status);
    }

    /** @param resource $stream */
    private static function contents($stream): string
    {
        \rewind($stream);
        $contents = \stream_get_contents($stream);
        \fclose($stream);

        return $contents === false ? '' : $contents;
    }

    /**
     * `php -n` with the extension running $script (and its arguments) under valgrind's memcheck,
     * with PHP's allocator off (it hides frees from memcheck); memcheck's own errors exit 99.
     * Null when valgrind is not installed.
     *
     * @param list<string> $script the script, then its arguments
     * @return array{exit: int, stdout: string, stderr: string}|null
     */
    public static function underMemcheck(array $script): ?array
    {
        $valgrind = Command::which('valgrind');
        if ($valgrind === null) {
            return null;
        }

        return Command::run(
            [
                $valgrind, '--tool=memcheck', '--error-exitcode=99', '--quiet',
                \PHP_BINARY, '-n', '-d', 'extension=' . self::extensionPath(), '-d', 'display_errors=stderr',
                ...$script,
            ],
            env: Command::env(['USE_ZEND_ALLOC' => '0']),
            timeout: 120.0,
        );
    }
}
