<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A clock running ahead or behind for one host of the fleet tests, or stepped while it runs:
 * the LD_PRELOAD shim of skewed_clock.c, built with gcc into a test's scratch directory, shifts
 * the system time its PHP and its sidecar read (CLOCK_MONOTONIC stays as it is).
 */
final class SkewedClock
{
    /** Why the shim cannot be built here, or null when it can. */
    public static function unavailable(): ?string
    {
        return Command::which('gcc') === null ? 'gcc is not installed: the skewed clock shim (tests/Support/skewed_clock.c) cannot be built' : null;
    }

    /**
     * The environment that runs a process $offsetSeconds ahead (negative: behind), the shim
     * built into $dir the first time.
     *
     * @return array<string, string>
     */
    public static function env(string $dir, int $offsetSeconds): array
    {
        return ['LD_PRELOAD' => self::shim($dir), 'GANESHA_SHM_TEST_CLOCK_OFFSET' => (string) $offsetSeconds];
    }

    /**
     * The environment of a clock that a test steps while its processes run: on time until
     * step($file, …) moves it. $file is made in $dir.
     *
     * @return array<string, string>
     */
    public static function steppable(string $dir, string $file): array
    {
        self::step($file, 0);

        return ['LD_PRELOAD' => self::shim($dir), 'GANESHA_SHM_TEST_CLOCK_FILE' => $file];
    }

    /** Sets the clock of the processes started with steppable($dir, $file) $offsetSeconds off. */
    public static function step(string $file, int $offsetSeconds): void
    {
        // One aligned word, written in place: the processes map the file and read it at each call.
        $handle = \fopen($file, 'c');
        if ($handle === false || \fwrite($handle, \pack('q', $offsetSeconds)) !== 8 || !\fclose($handle)) {
            throw new \RuntimeException("Could not write the clock step file {$file}");
        }
    }

    /** The shim, built into $dir the first time. */
    private static function shim(string $dir): string
    {
        $shim = $dir . '/skewed_clock.so';
        if (!\is_file($shim)) {
            $built = Command::run(['gcc', '-shared', '-fPIC', '-O2', '-o', $shim, __DIR__ . '/skewed_clock.c', '-ldl'], timeout: 60.0);
            if ($built['exit'] !== 0) {
                throw new \RuntimeException("Could not build the skewed clock shim:\n{$built['stderr']}");
            }
        }

        return $shim;
    }
}
