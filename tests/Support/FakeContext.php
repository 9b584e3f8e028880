<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Duck-typed stand-in for Ganesha's Context: the extension calls strategy() and
 * configuration().
 */
final class FakeContext
{
    /** Ganesha's Context::STRATEGY_RATE_SLIDING_TIME_WINDOW. */
    public const RATE = 'rate_sliding_time_window';

    /** Ganesha's Context::STRATEGY_COUNT. */
    public const COUNT = 'count';

    public function __construct(private string $strategy, private FakeConfiguration $configuration)
    {
    }

    /**
     * The Rate strategy over a sliding time window of $timeWindow seconds. By default no
     * half-open trial is ever due, so that loadLastFailureTime() reads back what was saved.
     */
    public static function make(
        int $timeWindow,
        ?FakeStorageKeys $keys = null,
        int $intervalToHalfOpen = FakeConfiguration::NEVER_HALF_OPEN,
    ): self {
        return new self(self::RATE, new FakeConfiguration($timeWindow, $keys ?? new FakeStorageKeys(), $intervalToHalfOpen));
    }

    /** The Count strategy: no time window. */
    public static function count(
        int $intervalToHalfOpen = FakeConfiguration::NEVER_HALF_OPEN,
        ?FakeStorageKeys $keys = null,
    ): self {
        return new self(self::COUNT, new FakeConfiguration(null, $keys ?? new FakeStorageKeys(), $intervalToHalfOpen));
    }

    public function strategy(): string
    {
        return $this->strategy;
    }

    public function configuration(): FakeConfiguration
    {
        return $this->configuration;
    }
}
