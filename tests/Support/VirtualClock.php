<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A clock tests can stop and move, shared by Ganesha and the adapter, as symfony/phpunit-bridge's
 * ClockMock does it:
 *
 *  - Ganesha's Rate and Count strategies call time() unqualified from the namespace
 *    Ackintosh\Ganesha\Strategy, so tests/Support/virtual_clock_functions.php (required by
 *    tests/bootstrap.php before any of Ganesha's code runs: PHP resolves an unqualified call
 *    once per call site) defines Ackintosh\Ganesha\Strategy\time(), which returns now();
 *  - the adapter is given callable() as its clock.
 *
 * Until a test calls freeze() or sleep(), now() is the system's time(). Tests reset() it in
 * tearDown(). Processes forked while it is frozen inherit its time.
 */
final class VirtualClock
{
    private static ?int $frozen = null;

    /** Stops the clock at Unix time $time. */
    public static function freeze(int $time): void
    {
        self::$frozen = $time;
    }

    /** Moves the clock $seconds forward, at once; a running clock is frozen at time() first. */
    public static function sleep(int $seconds): void
    {
        if ($seconds < 0) {
            throw new \InvalidArgumentException("Cannot sleep {$seconds} s.");
        }
        self::$frozen = (self::$frozen ?? \time()) + $seconds;
    }

    /** Back to the system's time(). */
    public static function reset(): void
    {
        self::$frozen = null;
    }

    public static function isFrozen(): bool
    {
        return self::$frozen !== null;
    }

    /** The time Ganesha and the adapter see: the frozen time, else the system's. */
    public static function now(): int
    {
        return self::$frozen ?? \time();
    }

    /** The clock to give the adapter's constructor. */
    public static function callable(): \Closure
    {
        return static fn (): int => self::now();
    }

    /**
     * Whether Ganesha's strategies read this clock: Ackintosh\Ganesha\Strategy\time() is the
     * one defined by tests/Support/virtual_clock_functions.php.
     */
    public static function isInstalledInGanesha(): bool
    {
        return \function_exists('Ackintosh\\Ganesha\\Strategy\\time')
            && (new \ReflectionFunction('Ackintosh\\Ganesha\\Strategy\\time'))->getFileName() === __DIR__ . '/virtual_clock_functions.php';
    }
}
