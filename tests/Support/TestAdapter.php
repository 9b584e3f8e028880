<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;

/**
 * The native adapter without Ganesha's interfaces, for the native suite.
 */
final class TestAdapter extends AbstractSlidingTimeWindowShm
{
    /**
     * An adapter of the Rate strategy whose context is set: time window $timeWindow seconds;
     * by default no half-open trial is ever due.
     *
     * @param (callable(): int)|null $clock
     */
    public static function forWindow(
        int $timeWindow,
        ?int $bucketDuration = null,
        ?FakeStorageKeys $keys = null,
        int $intervalToHalfOpen = FakeConfiguration::NEVER_HALF_OPEN,
        ?callable $clock = null,
    ): self {
        $adapter = new self($bucketDuration, $clock);
        $adapter->setContext(FakeContext::make($timeWindow, $keys, $intervalToHalfOpen));

        return $adapter;
    }

    /**
     * An adapter of the Count strategy whose context is set.
     *
     * @param (callable(): int)|null $clock
     */
    public static function forCount(
        int $intervalToHalfOpen = FakeConfiguration::NEVER_HALF_OPEN,
        ?callable $clock = null,
        ?FakeStorageKeys $keys = null,
    ): self {
        $adapter = new self(null, $clock);
        $adapter->setContext(FakeContext::count($intervalToHalfOpen, $keys));

        return $adapter;
    }
}
