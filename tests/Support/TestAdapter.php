<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;

/**
 * The native adapter without Ganesha's interfaces, for the native suite.
 */
final class TestAdapter extends AbstractSlidingTimeWindowShm
{
    /** An adapter whose context is set: time window $timeWindow seconds. */
    public static function forWindow(int $timeWindow, ?int $bucketDuration = null, ?FakeStorageKeys $keys = null): self
    {
        $adapter = new self($bucketDuration);
        $adapter->setContext(FakeContext::make($timeWindow, $keys));

        return $adapter;
    }
}
