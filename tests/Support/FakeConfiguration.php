<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/** Duck-typed stand-in for Ganesha's Configuration: what the extension reads of it. */
final class FakeConfiguration
{
    public function __construct(private int $timeWindow, private FakeStorageKeys $storageKeys)
    {
    }

    public function timeWindow(): int
    {
        return $this->timeWindow;
    }

    public function storageKeys(): FakeStorageKeys
    {
        return $this->storageKeys;
    }
}
