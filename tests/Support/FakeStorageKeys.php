<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Duck-typed stand-in for Ganesha's StorageKeys (the extension calls these methods by name),
 * so that the native suite runs without Ganesha. Defaults are Ganesha's own key parts.
 */
final class FakeStorageKeys
{
    public function __construct(
        private string $prefix = 'ganesha_',
        private string $success = '_success',
        private string $failure = '_failure',
        private string $rejection = '_rejection',
        private string $lastFailureTime = '_last_failure_time',
        private string $status = '_status',
    ) {
    }

    public function prefix(): string
    {
        return $this->prefix;
    }

    public function success(): string
    {
        return $this->success;
    }

    public function failure(): string
    {
        return $this->failure;
    }

    public function rejection(): string
    {
        return $this->rejection;
    }

    public function lastFailureTime(): string
    {
        return $this->lastFailureTime;
    }

    public function status(): string
    {
        return $this->status;
    }

    /** @return list<string> the five suffixes */
    public function suffixes(): array
    {
        return [$this->success, $this->failure, $this->rejection, $this->lastFailureTime, $this->status];
    }
}
