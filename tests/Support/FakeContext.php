<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/** Duck-typed stand-in for Ganesha's Context: the extension only calls configuration(). */
final class FakeContext
{
    public function __construct(private FakeConfiguration $configuration)
    {
    }

    public static function make(int $timeWindow, ?FakeStorageKeys $keys = null): self
    {
        return new self(new FakeConfiguration($timeWindow, $keys ?? new FakeStorageKeys()));
    }

    public function configuration(): FakeConfiguration
    {
        return $this->configuration;
    }
}
