<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Duck-typed stand-in for Ganesha's Configuration: what the extension reads of it.
 *
 * A Count strategy configuration has no time window: Ganesha's own timeWindow() then fails,
 * and so does this one, so that a test notices if the extension asks for it.
 */
final class FakeConfiguration
{
    /**
     * Interval to half-open that is never over: loadLastFailureTime() then claims no trial and
     * reads back what was saved.
     */
    public const NEVER_HALF_OPEN = \PHP_INT_MAX;

    public function __construct(
        private ?int $timeWindow,
        private FakeStorageKeys $storageKeys,
        private int $intervalToHalfOpen = self::NEVER_HALF_OPEN,
    ) {
    }

    public function timeWindow(): int
    {
        if ($this->timeWindow === null) {
            throw new \LogicException('A Count strategy configuration has no time window.');
        }

        return $this->timeWindow;
    }

    public function intervalToHalfOpen(): int
    {
        return $this->intervalToHalfOpen;
    }

    public function storageKeys(): FakeStorageKeys
    {
        return $this->storageKeys;
    }
}
