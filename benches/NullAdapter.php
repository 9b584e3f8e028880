<?php

/**
 * The floor of the benchmark: a Ganesha storage adapter that stores nothing, so that what a
 * workload costs over it is Ganesha's own cost (its strategy, key building and method calls).
 *
 * Every load returns 0, the status reads as calmed down, the last failure time as null, and
 * writes are ignored: a healthy service. The tripped and near-threshold workloads must take the
 * same path through Ganesha over every adapter, so the bench can also give it fixed answers for
 * a few keys (canned()); a lookup in a small PHP array, still no storage.
 *
 * Declared with Ganesha's interfaces when Ganesha is loadable, without them otherwise (the
 * bench then calls the adapter directly, workload (d) only).
 */

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Benches;

use Ackintosh\Ganesha\Storage\Adapter\SlidingTimeWindowInterface;
use Ackintosh\Ganesha\Storage\AdapterInterface;

trait NullAdapterMethods
{
    /** @var array<string, int> fixed answers of load() */
    private array $counts = [];

    /** @var array<string, int> fixed answers of loadLastFailureTime() */
    private array $lastFailureTimes = [];

    /** Gives load($key) the answer $count, and loadLastFailureTime($key) $lastFailureTime. */
    public function canned(string $key, int $count, ?int $lastFailureTime = null): void
    {
        $this->counts[$key] = $count;
        if ($lastFailureTime !== null) {
            $this->lastFailureTimes[$key] = $lastFailureTime;
        }
    }

    public function supportCountStrategy(): bool
    {
        return false;
    }

    public function supportRateStrategy(): bool
    {
        return true;
    }

    public function setContext($context): void
    {
    }

    public function setConfiguration($configuration): void
    {
    }

    public function load(string $service): int
    {
        return $this->counts[$service] ?? 0;
    }

    public function save(string $service, int $count): void
    {
    }

    public function increment(string $service): void
    {
    }

    public function decrement(string $service): void
    {
    }

    public function saveLastFailureTime(string $service, int $lastFailureTime): void
    {
    }

    public function loadLastFailureTime(string $service): ?int
    {
        return $this->lastFailureTimes[$service] ?? null;
    }

    public function saveStatus(string $service, int $status): void
    {
    }

    public function loadStatus(string $service): int
    {
        return 1; // Ganesha::STATUS_CALMED_DOWN
    }

    public function reset(): void
    {
    }
}

if (\interface_exists(AdapterInterface::class)) {
    final class NullAdapter implements AdapterInterface, SlidingTimeWindowInterface
    {
        use NullAdapterMethods;
    }
} else {
    final class NullAdapter
    {
        use NullAdapterMethods;
    }
}
