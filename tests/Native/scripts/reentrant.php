<?php

/*
 * User PHP calling the adapter back while the adapter is running it, for ReentrancyTest (run
 * under valgrind's memcheck): a clock that gives the adapter another configuration in the
 * middle of snapshot(), and a Context whose strategy() does the same in the middle of
 * setContext(). Prints, as JSON, what the adapter read under which configuration.
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

require dirname(__DIR__, 2) . '/Support/Autoload.php';
Zeusi\GaneshaShmAdapter\Tests\Support\Autoload::register(false);

/** A Context with thresholds (for snapshot()), whose strategy() may run a callback first. */
final class ReentrantContext
{
    /** @var (Closure(): void)|null */
    public ?Closure $onStrategy = null;

    public function __construct(private FakeStorageKeys $keys)
    {
    }

    public function strategy(): string
    {
        $callback = $this->onStrategy;
        $this->onStrategy = null;
        if ($callback !== null) {
            $callback();
        }

        return 'rate_sliding_time_window';
    }

    public function configuration(): self
    {
        return $this;
    }

    public function timeWindow(): int
    {
        return 60;
    }

    public function intervalToHalfOpen(): int
    {
        return 600;
    }

    public function failureRateThreshold(): int
    {
        return 50;
    }

    public function minimumRequests(): int
    {
        return 10;
    }

    public function storageKeys(): FakeStorageKeys
    {
        return $this->keys;
    }
}

// Long prefixes, so that the configuration's keys live on the heap and a read of freed ones shows.
$first = new ReentrantContext(new FakeStorageKeys('first_' . str_repeat('f', 60) . '_'));
$second = new ReentrantContext(new FakeStorageKeys('second_' . str_repeat('s', 60) . '_'));
$service = 'reentrant' . getmypid();

/** @var (Closure(): void)|null $duringClock */
$duringClock = null;
$adapter = new TestAdapter(null, static function () use (&$duringClock): int {
    $callback = $duringClock;
    $duringClock = null;
    if ($callback !== null) {
        $callback();
    }

    return 2_000_000_000;
});
$adapter->setContext($first);
$adapter->increment($first->storageKeys()->prefix() . $service . '_success');

// The clock sets the second configuration while snapshot() runs under the first.
$duringClock = static function () use ($adapter, $second): void {
    $adapter->setContext($second);
};
$snapshot = $adapter->snapshot();
$afterClock = array_keys($adapter->snapshot());

// strategy() sets the first configuration while setContext($second) reads the second.
$second->onStrategy = static function () use ($adapter, $first): void {
    $adapter->setContext($first);
};
$adapter->setContext($second);
$adapter->increment($second->storageKeys()->prefix() . $service . '_success');
$adapter->increment($second->storageKeys()->prefix() . $service . '_success');

echo json_encode([
    'during_clock' => array_map(static fn (array $row): ?int => $row['successes'], $snapshot),
    'after_clock' => $afterClock,
    'after_nested_set_context' => array_map(static fn (array $row): ?int => $row['successes'], $adapter->snapshot()),
    'service' => $service,
]), "\n";
