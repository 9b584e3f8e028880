<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The constructor's $clock: when given, the adapter calls it for the current Unix time instead
 * of reading the system clock. The times here are far from the system's, so that a count or an
 * expiry that followed the system clock would show.
 */
final class ClockTest extends TestCase
{
    /** The clock's time: years from the system's. */
    public const T = 2_000_000_000;

    private int $now = self::T;

    public function testEventsAreCountedInTheBucketsOfTheClocksTime(): void
    {
        // time window 2 s in buckets of 1 s: load() at second s sums seconds s-1 and s
        $adapter = TestAdapter::forWindow(2, 1, null, 600, $this->clock());
        $key = Unique::name('clock_buckets_');

        $adapter->increment($key);
        $adapter->increment($key);
        $adapter->increment($key);
        self::assertSame(3, $adapter->load($key));

        $this->now = self::T + 1;
        $adapter->increment($key);
        $adapter->increment($key);
        self::assertSame(5, $adapter->load($key), 'at +1 s: seconds +0 and +1');

        $this->now = self::T + 2;
        self::assertSame(2, $adapter->load($key), 'at +2 s: second +0 left the window');
        $this->now = self::T + 3;
        self::assertSame(0, $adapter->load($key));

        $system = TestAdapter::forWindow(2, 1);
        self::assertSame(0, $system->load($key), 'at the system\'s time, years away, there is nothing in the window');
    }

    public function testExpiryFollowsTheClock(): void
    {
        $adapter = TestAdapter::forWindow(2, 1, null, \PHP_INT_MAX, $this->clock());
        $key = Unique::name('clock_expiry_');
        $adapter->saveLastFailureTime($key, 1234);
        $adapter->saveStatus($key, 2);

        // a last failure time is kept (2 + 1) × 1 s, a status STATUS_TTL
        $this->now = self::T + 3;
        self::assertSame(1234, $adapter->loadLastFailureTime($key));
        $this->now = self::T + 4;
        self::assertNull($adapter->loadLastFailureTime($key));

        $this->now = self::T + AbstractSlidingTimeWindowShm::STATUS_TTL;
        self::assertSame(2, $adapter->loadStatus($key));
        $this->now = self::T + AbstractSlidingTimeWindowShm::STATUS_TTL + 1;
        self::assertSame(1, $adapter->loadStatus($key), 'an expired status reads as calmed down');
    }

    public function testACounterOfTheCountStrategyExpiresByTheClock(): void
    {
        $adapter = TestAdapter::forCount(600, $this->clock());
        $key = Unique::name('clock_count_');
        $adapter->save($key, 3);

        $this->now = self::T + AbstractSlidingTimeWindowShm::COUNT_TTL;
        self::assertSame(3, $adapter->load($key));
        $this->now = self::T + AbstractSlidingTimeWindowShm::COUNT_TTL + 1;
        self::assertSame(0, $adapter->load($key));
    }

    public function testEveryUseOfTheStoreReadsTheClock(): void
    {
        $calls = 0;
        $adapter = new TestAdapter(null, function () use (&$calls): int {
            ++$calls;

            return self::T;
        });
        $adapter->setContext(FakeContext::count());
        self::assertSame(0, $calls, 'neither the constructor nor setContext() reads the time');

        $key = Unique::name('clock_calls_');
        $operations = [
            'increment' => [$key], 'load' => [$key], 'saveLastFailureTime' => [$key, 1], 'loadLastFailureTime' => [$key],
            'saveStatus' => [$key, 2], 'loadStatus' => [$key], 'save' => [$key, 1], 'decrement' => [$key],
        ];
        foreach ($operations as $method => $args) {
            $before = $calls;
            $adapter->{$method}(...$args);
            self::assertGreaterThan($before, $calls, "{$method}() reads the clock");
        }
    }

    /**
     * @return array<string, array{mixed}>
     */
    public static function notInts(): array
    {
        return [
            'numeric string' => ['2000000000'],
            'float' => [2_000_000_000.0],
            'null' => [null],
            'true' => [true],
            'array' => [[2_000_000_000]],
        ];
    }

    /**
     * @dataProvider notInts
     */
    #[DataProvider('notInts')]
    public function testAClockReturningANonIntIsRefused(mixed $time): void
    {
        $adapter = new TestAdapter(null, static fn () => $time);
        $adapter->setContext(FakeContext::make(60));
        $key = Unique::name('clock_bad_');

        foreach (['increment' => [$key], 'load' => [$key], 'saveLastFailureTime' => [$key, 5], 'loadLastFailureTime' => [$key], 'saveStatus' => [$key, 2], 'loadStatus' => [$key]] as $method => $args) {
            try {
                $adapter->{$method}(...$args);
                self::fail("{$method}() used a clock returning " . \get_debug_type($time));
            } catch (\UnexpectedValueException $e) {
                self::assertStringContainsString('clock', $e->getMessage());
            }
        }

        $check = TestAdapter::forWindow(60, null, null, \PHP_INT_MAX);
        self::assertSame(0, $check->load($key), 'nothing was counted');
        self::assertNull($check->loadLastFailureTime($key), 'nothing was saved');
        self::assertSame(1, $check->loadStatus($key), 'nothing was saved');
    }

    public function testAnExceptionOfTheClockIsThrownAsIs(): void
    {
        $thrown = new \RuntimeException('the clock stopped');
        $adapter = new TestAdapter(null, static function () use ($thrown): int {
            throw $thrown;
        });
        $adapter->setContext(FakeContext::make(60));

        try {
            $adapter->increment(Unique::name('clock_throws_'));
            self::fail('increment() did not throw');
        } catch (\RuntimeException $e) {
            self::assertSame($thrown, $e);
        }
    }

    public function testTheClockMustBeCallable(): void
    {
        $this->expectException(\TypeError::class);
        new TestAdapter(null, 'no_such_function_' . \bin2hex(\random_bytes(4)));
    }

    public function testAnyCallableIsAClock(): void
    {
        $key = Unique::name('clock_callables_');
        $clock = new class () {
            public function __invoke(): int
            {
                return ClockTest::T;
            }

            public function now(): int
            {
                return ClockTest::T;
            }

            public static function staticNow(): int
            {
                return ClockTest::T;
            }
        };

        foreach ([$clock, [$clock, 'now'], [$clock::class, 'staticNow'], $this->clock()] as $callable) {
            $adapter = new TestAdapter(2, $callable);
            $adapter->setContext(FakeContext::make(2));
            $adapter->increment($key);
        }

        self::assertSame(4, TestAdapter::forWindow(2, 2, null, 600, $this->clock())->load($key));
        self::assertSame(0, TestAdapter::forWindow(2, 2)->load($key), 'none of them counted at the system\'s time');
    }

    private function clock(): \Closure
    {
        return fn (): int => $this->now;
    }

    /**
     * Without a clock given, the adapter reads the time as PHP's time() does, also in the first
     * milliseconds of a second, when the kernel's coarse clock (glibc's time(NULL)) still shows
     * the second before: an event counted then is in the second PHP's time() shows. Each round
     * counts one event right after PHP's time() has turned, then, 20 ms later in the same second,
     * loads it from a window of that one second.
     */
    public function testTheSystemClockIsTheOnePhpsTimeReadsEvenAsASecondBegins(): void
    {
        $adapter = TestAdapter::forWindow(1);
        foreach ([1, 2, 3] as $round) {
            $key = Unique::name('clock_edge_');
            $before = \time();
            while (($second = \time()) === $before) {
            }
            $adapter->increment($key);
            \usleep(20_000);
            $count = $adapter->load($key);
            if (\time() !== $second) {
                self::markTestIncomplete('this machine took more than a second over 20 ms');
            }
            self::assertSame(1, $count, "round {$round}: the event was counted in another second than time()'s {$second}");
        }
    }
}
