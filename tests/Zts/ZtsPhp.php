<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Zts;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;

/**
 * The thread-safe PHP of the zts suite: the build tests/zts.sh made (GANESHA_SHM_ZTS_PHP, else
 * /var/cache/ganesha-shm-ci/zts/current), the extension built against it (GANESHA_SHM_ZTS_EXT,
 * which tests/run.sh sets when it builds it), and the harness that runs PHP requests on threads
 * (tests/Zts/harness.c, compiled here against that PHP's embed SAPI, once per version of its
 * source, beside the extension).
 */
final class ZtsPhp
{
    private const DEFAULT_PREFIX = '/var/cache/ganesha-shm-ci/zts/current';

    public static function prefix(): string
    {
        $prefix = \getenv('GANESHA_SHM_ZTS_PHP');

        return \is_string($prefix) && $prefix !== '' ? $prefix : self::DEFAULT_PREFIX;
    }

    /** Why the zts suite cannot run here, or null when it can. */
    public static function missing(): ?string
    {
        $prefix = self::prefix();
        if (!\is_file($prefix . '/lib/php/libphp.so') || !\is_file($prefix . '/apache/libphp.so') || !\is_executable($prefix . '/bin/php')) {
            return "no thread-safe PHP in {$prefix}: `bash tests/zts.sh` builds it from Debian's php8.2 source package (as .ci/run does), and tests/run.sh then builds the extension for it";
        }
        $extension = (string) \getenv('GANESHA_SHM_ZTS_EXT');
        if ($extension === '' || !\is_file($extension)) {
            return 'the extension is not built for the thread-safe PHP (GANESHA_SHM_ZTS_EXT): run the suite through tests/run.sh, which builds it';
        }
        if (Command::which('cc') === null) {
            return 'the zts suite compiles its harness with cc: apt-get install gcc';
        }

        return null;
    }

    /** The extension built against the thread-safe PHP. */
    public static function extension(): string
    {
        return (string) \getenv('GANESHA_SHM_ZTS_EXT');
    }

    /** The thread-safe CLI. */
    public static function cli(): string
    {
        return self::prefix() . '/bin/php';
    }

    /** mod_php of the thread-safe PHP, for Apache's event MPM. */
    public static function apacheModule(): string
    {
        return self::prefix() . '/apache/libphp.so';
    }

    /** The harness, compiled on first use. */
    public static function harness(): string
    {
        $source = __DIR__ . '/harness.c';
        $prefix = \realpath(self::prefix()) ?: self::prefix();
        $binary = \dirname(self::extension()) . '/zts-harness-' . \substr(\sha1((string) \file_get_contents($source) . $prefix), 0, 12);
        if (\is_file($binary)) {
            return $binary;
        }
        $includes = Command::run([$prefix . '/bin/php-config', '--includes']);
        $includeDir = Command::run([$prefix . '/bin/php-config', '--include-dir']);
        if ($includes['exit'] !== 0 || $includeDir['exit'] !== 0) {
            throw new \RuntimeException("php-config failed: {$includes['stderr']}{$includeDir['stderr']}");
        }
        $command = ['cc', '-O2', '-Wall', '-Werror', '-o', $binary . '.tmp', $source, '-I' . \trim($includeDir['stdout']),
            ...\preg_split('/\s+/', \trim($includes['stdout'])),
            '-L' . $prefix . '/lib/php', '-lphp', '-Wl,-rpath,' . $prefix . '/lib/php', '-pthread'];
        $built = Command::run($command, null, null, 120.0);
        if ($built['exit'] !== 0) {
            throw new \RuntimeException('Could not compile the harness: ' . \implode(' ', $command) . "\n" . $built['stderr']);
        }
        \rename($binary . '.tmp', $binary);

        return $binary;
    }

    /**
     * The harness's command line for run(), for a test that starts it itself.
     *
     * @param array<string, scalar> $query
     * @param array<string, scalar> $ini
     * @return list<string>
     */
    public static function command(int $threads, int $requests, array $query, array $ini = [], int $waves = 1, bool $fork = false): array
    {
        $command = [self::harness(), '-t', (string) $threads, '-r', (string) $requests, '-w', (string) $waves];
        if ($fork) {
            $command[] = '-f';
        }
        foreach (['extension' => self::extension()] + $ini as $name => $value) {
            \array_push($command, '-d', $name . '=' . $value);
        }
        \array_push($command, __DIR__ . '/scripts/request.php', \http_build_query($query));

        return $command;
    }

    /**
     * Runs $threads threads of $requests requests of tests/Zts/scripts/request.php, in $waves
     * waves, the extension loaded with $ini, with $query; $fork: PHP starts, then the process
     * forks and the threads run in the child (harness.c's -f).
     *
     * @param array<string, scalar> $query the script's query (see scripts/request.php)
     * @param array<string, scalar> $ini
     * @param list<string> $wrapper what runs the harness (valgrind and its options), if anything
     * @return array{exit: int, stdout: string, stderr: string, answers: list<array<string, mixed>>}
     */
    public static function run(int $threads, int $requests, array $query, array $ini = [], int $waves = 1, bool $fork = false, array $wrapper = [], float $timeout = 120.0): array
    {
        $result = Command::run([...$wrapper, ...self::command($threads, $requests, $query, $ini, $waves, $fork)], null, null, $timeout);
        $answers = [];
        foreach (\explode("\n", \trim($result['stdout'])) as $line) {
            if ($line !== '') {
                $answers[] = \json_decode($line, true, 512, \JSON_THROW_ON_ERROR);
            }
        }

        return $result + ['answers' => $answers];
    }
}
