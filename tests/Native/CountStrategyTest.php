<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Under the Count strategy (Context::strategy() === 'count') keys are plain counters: save()
 * sets (0 to 16777215), increment() adds one, decrement() takes one away but never below 0,
 * load() reads. A counter is kept COUNT_TTL seconds after its last write.
 */
final class CountStrategyTest extends TestCase
{
    private const T = 2_000_000_000;

    private const MAX = 16_777_215;

    private int $now = self::T;

    private TestAdapter $adapter;

    protected function setUp(): void
    {
        $this->adapter = TestAdapter::forCount(600, fn (): int => $this->now);
    }

    public function testSaveSetsTheCounter(): void
    {
        $key = Unique::name('count_save_');
        self::assertSame(0, $this->adapter->load($key));

        foreach ([5, 0, 1, self::MAX, 42] as $count) {
            $this->adapter->save($key, $count);
            self::assertSame($count, $this->adapter->load($key));
        }
    }

    /**
     * @return array<string, array{int}>
     */
    public static function countsOutOfRange(): array
    {
        return [
            'minus one' => [-1],
            '2^24' => [self::MAX + 1],
            'PHP_INT_MAX' => [\PHP_INT_MAX],
            'PHP_INT_MIN' => [\PHP_INT_MIN],
        ];
    }

    /**
     * @dataProvider countsOutOfRange
     */
    #[DataProvider('countsOutOfRange')]
    public function testSaveRefusesCountsOutOfRange(int $count): void
    {
        $key = Unique::name('count_range_');
        $this->adapter->save($key, 9);

        try {
            $this->adapter->save($key, $count);
            self::fail("save() accepted {$count}");
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('16777215', $e->getMessage());
        }
        self::assertSame(9, $this->adapter->load($key), 'the refused count left the stored one');
    }

    public function testSaveOfANewKeyOutOfRangeStoresNothing(): void
    {
        $key = Unique::name('count_range_new_');
        $used = \ganesha_shm_info()['counter_slots_used'];

        try {
            $this->adapter->save($key, -1);
            self::fail('save() accepted -1');
        } catch (\InvalidArgumentException) {
        }

        self::assertSame($used, \ganesha_shm_info()['counter_slots_used']);
    }

    public function testIncrementAndDecrement(): void
    {
        $key = Unique::name('count_incdec_');
        for ($i = 1; $i <= 3; ++$i) {
            $this->adapter->increment($key);
            self::assertSame($i, $this->adapter->load($key));
        }
        $this->adapter->decrement($key);
        self::assertSame(2, $this->adapter->load($key));
        $this->adapter->save($key, 10);
        $this->adapter->increment($key);
        $this->adapter->decrement($key);
        $this->adapter->decrement($key);
        self::assertSame(9, $this->adapter->load($key));
    }

    public function testDecrementNeverGoesBelowZero(): void
    {
        $key = Unique::name('count_floor_');
        $this->adapter->save($key, 2);
        for ($i = 0; $i < 10; ++$i) {
            $this->adapter->decrement($key);
        }
        self::assertSame(0, $this->adapter->load($key));

        $this->adapter->increment($key);
        self::assertSame(1, $this->adapter->load($key), 'one increment after the decrements below zero');
    }

    public function testADecrementOfAnAbsentKeyStoresNothing(): void
    {
        $key = Unique::name('count_absent_');
        // Slots given to new keys, a total that only this process changes here (the slots in
        // use would also move when a key of an earlier test expires in between).
        $claims = \ganesha_shm_info()['claims'];

        $this->adapter->decrement($key);
        $this->adapter->decrement($key);

        self::assertSame($claims, \ganesha_shm_info()['claims'], 'no slot was claimed');
        self::assertSame(0, $this->adapter->load($key));
        $this->adapter->increment($key);
        self::assertSame(1, $this->adapter->load($key));
        self::assertSame($claims + 1, \ganesha_shm_info()['claims']);
    }

    public function testIncrementStopsAtTheMaximum(): void
    {
        $key = Unique::name('count_max_');
        $this->adapter->save($key, self::MAX - 1);
        $this->adapter->increment($key);
        self::assertSame(self::MAX, $this->adapter->load($key));
        $this->adapter->increment($key);
        self::assertSame(self::MAX, $this->adapter->load($key), 'the counter does not wrap around to 0');
        $this->adapter->decrement($key);
        self::assertSame(self::MAX - 1, $this->adapter->load($key));
    }

    public function testCountersDoNotSlide(): void
    {
        $key = Unique::name('count_static_');
        $this->adapter->increment($key);
        $this->adapter->increment($key);

        $this->now += 3600;
        self::assertSame(2, $this->adapter->load($key), 'no time window: an hour later the count is the same');
    }

    public function testACounterIsKeptCountTtlAfterItsLastWrite(): void
    {
        self::assertSame(86_400, AbstractSlidingTimeWindowShm::COUNT_TTL);
        [$incremented, $decremented, $saved, $loaded] = [Unique::name('ttl_inc_'), Unique::name('ttl_dec_'), Unique::name('ttl_save_'), Unique::name('ttl_load_')];
        foreach ([$incremented, $decremented, $saved, $loaded] as $key) {
            $this->adapter->save($key, 5);
        }

        $this->now = self::T + 50_000;
        $this->adapter->increment($incremented);
        $this->adapter->decrement($decremented);
        $this->adapter->save($saved, 7);
        self::assertSame(5, $this->adapter->load($loaded));

        $this->now = self::T + 86_400;
        self::assertSame(5, $this->adapter->load($loaded), 'kept COUNT_TTL');
        $this->now = self::T + 86_401;
        self::assertSame(0, $this->adapter->load($loaded), 'gone COUNT_TTL after the last write: a load is no write');

        $this->now = self::T + 50_000 + 86_400;
        self::assertSame([6, 4, 7], [$this->adapter->load($incremented), $this->adapter->load($decremented), $this->adapter->load($saved)]);
        $this->now = self::T + 50_000 + 86_401;
        self::assertSame([0, 0, 0], [$this->adapter->load($incremented), $this->adapter->load($decremented), $this->adapter->load($saved)]);

        $this->adapter->increment($incremented);
        self::assertSame(1, $this->adapter->load($incremented), 'an expired counter counts from 0 again');
        $this->adapter->decrement($decremented);
        self::assertSame(0, $this->adapter->load($decremented));
    }

    public function testTheLastFailureTimeIsKeptCountTtl(): void
    {
        $key = Unique::name('count_lft_');
        $neverDue = TestAdapter::forCount(\PHP_INT_MAX, fn (): int => $this->now);
        $neverDue->saveLastFailureTime($key, 1234);

        $this->now = self::T + 86_400;
        self::assertSame(1234, $neverDue->loadLastFailureTime($key));
        $this->now = self::T + 86_401;
        self::assertNull($neverDue->loadLastFailureTime($key));
    }

    public function testTheCounterAndTheLastFailureTimeOfOneKeyAreIndependent(): void
    {
        // with an adapter implementing SlidingTimeWindowInterface, Ganesha keeps the last
        // failure time under the failure key, whose counter it saves, increments and decrements
        $key = Unique::name('ganesha_svc_') . '_failure';
        $neverDue = TestAdapter::forCount(\PHP_INT_MAX, fn (): int => $this->now);
        $neverDue->save($key, 3);
        $neverDue->saveLastFailureTime($key, self::T - 5);
        $neverDue->increment($key);
        $neverDue->decrement($key);
        $neverDue->decrement($key);

        self::assertSame(2, $neverDue->load($key));
        self::assertSame(self::T - 5, $neverDue->loadLastFailureTime($key));

        $this->now = self::T + 50_000;
        $neverDue->saveLastFailureTime($key, self::T + 50_000);
        $this->now = self::T + 86_401;
        self::assertSame(0, $neverDue->load($key), 'saving a last failure time does not keep the counter');
        self::assertSame(self::T + 50_000, $neverDue->loadLastFailureTime($key));
    }

    public function testStatusesAsWithTheRateStrategy(): void
    {
        $key = Unique::name('count_status_');
        self::assertSame(1, $this->adapter->loadStatus($key));
        $this->adapter->saveStatus($key, 2);
        self::assertSame(2, $this->adapter->loadStatus($key));
        $this->now = self::T + AbstractSlidingTimeWindowShm::STATUS_TTL + 1;
        self::assertSame(1, $this->adapter->loadStatus($key));
    }

    public function testAdaptersShareTheCounters(): void
    {
        $key = Unique::name('count_shared_');
        $other = TestAdapter::forCount(10, fn (): int => $this->now);
        $this->adapter->save($key, 4);
        $other->increment($key);
        self::assertSame(5, $this->adapter->load($key));
    }

    public function testResetDeletesTheCountersOfTheConfiguredKeys(): void
    {
        $keys = new FakeStorageKeys(Unique::name('cnt') . '_');
        $adapter = TestAdapter::forCount(600, null, $keys);
        $mine = $keys->prefix() . 'svc_failure';
        $theirs = Unique::name('other_') . '_failure';
        $adapter->save($mine, 3);
        $adapter->saveLastFailureTime($mine, 99);
        $adapter->saveStatus($keys->prefix() . 'svc_status', 2);
        $adapter->save($theirs, 4);

        $adapter->reset();

        self::assertSame(0, $adapter->load($mine));
        self::assertNull($adapter->loadLastFailureTime($mine));
        self::assertSame(1, $adapter->loadStatus($keys->prefix() . 'svc_status'));
        self::assertSame(4, $adapter->load($theirs));
        $adapter->decrement($mine);
        self::assertSame(0, $adapter->load($mine));
    }
}
