<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Waits aligned to whole seconds of time(), so that tests of time windows know in which
 * second (and so in which bucket) every event falls.
 */
final class Clock
{
    /** How far into a second the waits end: room for the clock, none for the work. */
    private const MARGIN_US = 20_000;

    /** Sleeps until just after the start of second $second of time(). */
    public static function sleepUntil(int $second): void
    {
        $wait = ($second + self::MARGIN_US / 1e6) - \microtime(true);
        if ($wait > 0) {
            \usleep((int) \ceil($wait * 1e6));
        }
        while (\time() < $second) {
            \usleep(1_000);
        }
    }

    /** Sleeps until the start of the next second and returns it. */
    public static function nextSecond(): int
    {
        $next = \time() + 1;
        self::sleepUntil($next);

        return $next;
    }

    /**
     * Sleeps until the start of the next second s with s % $modulus === $remainder, and returns s.
     */
    public static function nextSecondWhere(int $modulus, int $remainder): int
    {
        $next = \time() + 1;
        while ($next % $modulus !== $remainder) {
            ++$next;
        }
        self::sleepUntil($next);

        return $next;
    }
}
