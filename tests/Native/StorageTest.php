<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Counts, last failure times and statuses, within one time window.
 */
final class StorageTest extends TestCase
{
    private TestAdapter $adapter;

    protected function setUp(): void
    {
        $this->adapter = TestAdapter::forWindow(60);
    }

    public function testIncrementAndLoad(): void
    {
        $a = Unique::name('count_a_');
        $b = Unique::name('count_b_');

        self::assertSame(0, $this->adapter->load($a));
        for ($i = 1; $i <= 25; ++$i) {
            $this->adapter->increment($a);
            self::assertSame($i, $this->adapter->load($a));
        }
        $this->adapter->increment($b);

        self::assertSame(25, $this->adapter->load($a));
        self::assertSame(1, $this->adapter->load($b));
    }

    public function testManyIncrementsAreExact(): void
    {
        $key = Unique::name('many_');
        for ($i = 0; $i < 100_000; ++$i) {
            $this->adapter->increment($key);
        }

        self::assertSame(100_000, $this->adapter->load($key));
    }

    public function testAdaptersOfBucketsOfTheSameDurationShareTheCounts(): void
    {
        // buckets of 1 s: windows of 60 s and 30 s by default, 120 s when asked
        $key = Unique::name('shared_');
        $this->adapter->increment($key);
        $this->adapter->increment($key);
        $thirty = TestAdapter::forWindow(30);
        $thirty->increment($key);

        self::assertSame(3, $this->adapter->load($key));
        self::assertSame(3, $thirty->load($key));
        self::assertSame(3, TestAdapter::forWindow(120, 1)->load($key));
    }

    public function testLastFailureTime(): void
    {
        $key = Unique::name('lft_');
        self::assertNull($this->adapter->loadLastFailureTime($key));

        $now = \time();
        $this->adapter->saveLastFailureTime($key, $now);
        self::assertSame($now, $this->adapter->loadLastFailureTime($key));

        $this->adapter->saveLastFailureTime($key, $now - 5);
        self::assertSame($now - 5, $this->adapter->loadLastFailureTime($key), 'a later save replaces the value');

        self::assertNull($this->adapter->loadLastFailureTime($key . 'x'));
    }

    public function testLastFailureTimeIsKeptFromTheSaveNotFromItsValue(): void
    {
        $key = Unique::name('lft_value_');
        // a value far in the past: the time it is kept counts from the save
        $this->adapter->saveLastFailureTime($key, 42);
        self::assertSame(42, $this->adapter->loadLastFailureTime($key));
        $this->adapter->saveLastFailureTime($key, 0);
        self::assertSame(0, $this->adapter->loadLastFailureTime($key));
    }

    public function testCountAndLastFailureTimeUnderOneKeyAreIndependent(): void
    {
        // Ganesha's Storage passes the failure key to increment()/load() and to
        // saveLastFailureTime()/loadLastFailureTime() alike
        $key = Unique::name('ganesha_svc_') . '_failure';
        $this->adapter->increment($key);
        $this->adapter->increment($key);
        $this->adapter->increment($key);
        $now = \time();
        $this->adapter->saveLastFailureTime($key, $now);
        $this->adapter->increment($key);

        self::assertSame(4, $this->adapter->load($key));
        self::assertSame($now, $this->adapter->loadLastFailureTime($key));

        $other = Unique::name('lft_only_');
        $this->adapter->saveLastFailureTime($other, $now);
        self::assertSame(0, $this->adapter->load($other), 'a last failure time is not a count');
    }

    public function testStatus(): void
    {
        $key = Unique::name('status_');
        self::assertSame(1, $this->adapter->loadStatus($key), 'an absent status reads as calmed down (1)');

        $this->adapter->saveStatus($key, 2);
        self::assertSame(2, $this->adapter->loadStatus($key));
        $this->adapter->saveStatus($key, 1);
        self::assertSame(1, $this->adapter->loadStatus($key));
        $this->adapter->saveStatus($key, 7);
        self::assertSame(7, $this->adapter->loadStatus($key));

        self::assertSame(1, $this->adapter->loadStatus($key . 'x'));
        self::assertSame(0, $this->adapter->load($key), 'a status is not a count');
        self::assertNull($this->adapter->loadLastFailureTime($key), 'a status is not a last failure time');
    }

    public function testStatusUnderACounterKeyIsIndependent(): void
    {
        $key = Unique::name('status_counter_');
        $this->adapter->increment($key);
        $this->adapter->saveStatus($key, 2);
        $this->adapter->increment($key);

        self::assertSame(2, $this->adapter->load($key));
        self::assertSame(2, $this->adapter->loadStatus($key));
    }

    public function testAnAbsentStatusIsNotStored(): void
    {
        $key = Unique::name('absent_status_');
        $before = \ganesha_shm_info()['status_slots_used'];

        self::assertSame(1, $this->adapter->loadStatus($key));
        self::assertSame(1, $this->adapter->loadStatus($key));

        self::assertSame($before, \ganesha_shm_info()['status_slots_used']);

        $this->adapter->saveStatus($key, 2);
        self::assertSame($before + 1, \ganesha_shm_info()['status_slots_used']);
    }

    /**
     * @return array<string, array{int}>
     */
    public static function lastFailureTimesInRange(): array
    {
        return [
            'largest 56-bit' => [2 ** 55 - 1],
            'smallest kept: -2^55 + 2^32 (the 2^32 below are the empty values of slots)' => [-(2 ** 55) + 2 ** 32],
            'minus one' => [-1],
            'year 9999' => [253402300799],
        ];
    }

    /**
     * @dataProvider lastFailureTimesInRange
     */
    #[DataProvider('lastFailureTimesInRange')]
    public function testLastFailureTimesIn56BitRange(int $value): void
    {
        $key = Unique::name('lft_range_');
        $this->adapter->saveLastFailureTime($key, $value);
        self::assertSame($value, $this->adapter->loadLastFailureTime($key));
    }

    /**
     * @return array<string, array{int}>
     */
    public static function lastFailureTimesOutOfRange(): array
    {
        return [
            '2^55' => [2 ** 55],
            '-2^55 - 1' => [-(2 ** 55) - 1],
            '-2^55, an empty value' => [-(2 ** 55)],
            '-2^55 + 2^32 - 1, an empty value' => [-(2 ** 55) + 2 ** 32 - 1],
            'PHP_INT_MAX' => [\PHP_INT_MAX],
            'PHP_INT_MIN' => [\PHP_INT_MIN],
        ];
    }

    /**
     * @dataProvider lastFailureTimesOutOfRange
     */
    #[DataProvider('lastFailureTimesOutOfRange')]
    public function testLastFailureTimesOutOf56BitRangeAreRefused(int $value): void
    {
        $key = Unique::name('lft_out_');
        $this->adapter->saveLastFailureTime($key, 1000);

        try {
            $this->adapter->saveLastFailureTime($key, $value);
            self::fail("saveLastFailureTime() accepted {$value}");
        } catch (\InvalidArgumentException $e) {
            self::assertNotSame('', $e->getMessage());
        }
        self::assertSame(1000, $this->adapter->loadLastFailureTime($key), 'the refused value left the stored one');
    }

    /**
     * @return array<string, array{int}>
     */
    public static function statusesInRange(): array
    {
        return [
            'INT32_MAX' => [2147483647],
            'INT32_MIN' => [-2147483648],
            'zero' => [0],
            'tripped' => [2],
        ];
    }

    /**
     * @dataProvider statusesInRange
     */
    #[DataProvider('statusesInRange')]
    public function testStatusesIn32BitRange(int $value): void
    {
        $key = Unique::name('status_range_');
        $this->adapter->saveStatus($key, $value);
        self::assertSame($value, $this->adapter->loadStatus($key));
    }

    /**
     * @return array<string, array{int}>
     */
    public static function statusesOutOfRange(): array
    {
        return [
            'INT32_MAX + 1' => [2147483648],
            'INT32_MIN - 1' => [-2147483649],
            'PHP_INT_MAX' => [\PHP_INT_MAX],
            'PHP_INT_MIN' => [\PHP_INT_MIN],
        ];
    }

    /**
     * @dataProvider statusesOutOfRange
     */
    #[DataProvider('statusesOutOfRange')]
    public function testStatusesOutOf32BitRangeAreRefused(int $value): void
    {
        $key = Unique::name('status_out_');
        $this->adapter->saveStatus($key, 2);

        try {
            $this->adapter->saveStatus($key, $value);
            self::fail("saveStatus() accepted {$value}");
        } catch (\InvalidArgumentException $e) {
            self::assertNotSame('', $e->getMessage());
        }
        self::assertSame(2, $this->adapter->loadStatus($key), 'the refused value left the stored one');
    }
}
