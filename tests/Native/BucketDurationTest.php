<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * How a time window is split into buckets: the bucket duration given to the constructor, or
 * ceil(timeWindow / 60); at most 120 buckets, and a bucket no longer than the window.
 */
final class BucketDurationTest extends TestCase
{
    public function testConstants(): void
    {
        self::assertSame(120, AbstractSlidingTimeWindowShm::MAX_BUCKETS);
        self::assertSame(60, AbstractSlidingTimeWindowShm::DEFAULT_BUCKETS);
        self::assertSame(86400, AbstractSlidingTimeWindowShm::STATUS_TTL);
        self::assertSame(86400, AbstractSlidingTimeWindowShm::COUNT_TTL);
    }

    public function testTheClassIsAbstract(): void
    {
        $class = new \ReflectionClass(AbstractSlidingTimeWindowShm::class);
        self::assertTrue($class->isAbstract());
        self::assertFalse($class->isFinal());
        self::assertInstanceOf(AbstractSlidingTimeWindowShm::class, new TestAdapter());
    }

    /**
     * @return array<string, array{int, int|null}>
     */
    public static function validWindows(): array
    {
        return [
            '30 s, default: 30 buckets of 1 s' => [30, null],
            '600 s, default: 60 buckets of 10 s' => [600, null],
            '61 s, default: 31 buckets of 2 s' => [61, null],
            '120 s in 120 buckets of 1 s' => [120, 1],
            '10 s in 4 buckets of 3 s' => [10, 3],
            '600 s in one bucket' => [600, 600],
            '1 s, default' => [1, null],
            '7200 s, default: 60 buckets of 120 s' => [7200, null],
            '239 s in 120 buckets of 2 s' => [239, 2],
        ];
    }

    /**
     * @dataProvider validWindows
     */
    #[DataProvider('validWindows')]
    public function testValidBucketDurationsCount(int $timeWindow, ?int $bucketDuration): void
    {
        $adapter = new TestAdapter($bucketDuration);
        $adapter->setContext(FakeContext::make($timeWindow));

        $key = Unique::name('bucket_');
        self::assertSame(0, $adapter->load($key));
        $adapter->increment($key);
        $adapter->increment($key);
        self::assertSame(2, $adapter->load($key));
    }

    /**
     * @return array<string, array{int, int}>
     */
    public static function invalidWindows(): array
    {
        return [
            'bucket longer than the window' => [10, 20],
            '600 buckets of 1 s' => [600, 1],
            '121 buckets of 2 s' => [241, 2],
            'bucket of PHP_INT_MAX s' => [60, \PHP_INT_MAX],
            '200 buckets of 1 s' => [200, 1],
        ];
    }

    /**
     * @dataProvider invalidWindows
     */
    #[DataProvider('invalidWindows')]
    public function testInvalidBucketDurationsAreRefusedAtSetContext(int $timeWindow, int $bucketDuration): void
    {
        $adapter = new TestAdapter($bucketDuration);

        try {
            $adapter->setContext(FakeContext::make($timeWindow));
            self::fail("setContext() accepted a time window of {$timeWindow} s in buckets of {$bucketDuration} s");
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString((string) $timeWindow, $e->getMessage());
            self::assertMatchesRegularExpression('/(?<!\d)' . $bucketDuration . '(?!\d)/', $e->getMessage());
        }
    }

    public function testTooManyBucketsNamesTheLimit(): void
    {
        $adapter = new TestAdapter(1);
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/(?<!\d)120(?!\d)/');
        $adapter->setContext(FakeContext::make(121));
    }

    /**
     * ganesha_shm.max_buckets sizes every counter's ring: a store for windows of 60 buckets
     * counts them, refuses longer ones naming the setting, and takes at most 4 KB a service.
     */
    public function testMaxBucketsSizesTheRings(): void
    {
        $code = \sprintf(
            '%1$s $a = new \\%2$s(1); $a->setContext(\\%3$s::make(60));
            $a->increment("k"); $a->increment("k");
            try { (new \\%2$s(1))->setContext(\\%3$s::make(61)); $refused = "accepted"; }
            catch (\\InvalidArgumentException $e) { $refused = $e->getMessage(); }
            echo json_encode(["load" => $a->load("k"), "refused" => $refused, "info" => ganesha_shm_info()]);',
            Php::autoloadCode(),
            TestAdapter::class,
            FakeContext::class
        );
        $sixty = Php::json($code, ['ganesha_shm.max_buckets' => 60]);
        self::assertSame(2, $sixty['load']);
        self::assertStringContainsString('61 buckets, the maximum is 60 (ganesha_shm.max_buckets', $sixty['refused']);
        self::assertSame(60, $sixty['info']['max_buckets']);
        self::assertLessThanOrEqual(4096, $sixty['info']['bytes_per_service']);

        $default = Php::json($code);
        self::assertSame(['load' => 2, 'refused' => 'accepted', 'max_buckets' => 120], ['load' => $default['load'], 'refused' => $default['refused'], 'max_buckets' => $default['info']['max_buckets']]);
        self::assertGreaterThan($sixty['info']['counter_slot_bytes'], $default['info']['counter_slot_bytes'], 'a ring of 122 buckets, not 62');

        foreach (['0', '121', 'many'] as $value) {
            $result = Php::withExtension('echo ganesha_shm_info()["max_buckets"];', ['ganesha_shm.max_buckets' => $value]);
            self::assertSame('120', $result['stdout'], $value . ': ' . $result['stderr']);
            self::assertStringContainsString('ganesha_shm.max_buckets="' . $value . '" is not a whole number from 1 to 120; using 120', $result['stderr']);
        }
    }

    /**
     * @return array<string, array{int}>
     */
    public static function invalidDurations(): array
    {
        return ['zero' => [0], 'minus one' => [-1], 'PHP_INT_MIN' => [\PHP_INT_MIN]];
    }

    /**
     * @dataProvider invalidDurations
     */
    #[DataProvider('invalidDurations')]
    public function testConstructorRefusesADurationBelowOne(int $bucketDuration): void
    {
        $this->expectException(\InvalidArgumentException::class);
        new TestAdapter($bucketDuration);
    }

    public function testConstructorAcceptsNullAndOne(): void
    {
        $adapter = new TestAdapter(null);
        $adapter->setContext(FakeContext::make(60));
        $other = new TestAdapter(1);
        $other->setContext(FakeContext::make(60));

        $key = Unique::name('ctor_');
        $adapter->increment($key);
        $other->increment($key);
        // two adapters of the same window share the store
        self::assertSame(2, $adapter->load($key));
        self::assertSame(2, $other->load($key));
    }

    public function testASecondSetContextReplacesTheFirst(): void
    {
        $adapter = new TestAdapter(20);
        $adapter->setContext(FakeContext::make(60));

        try {
            $adapter->setContext(FakeContext::make(10));
            self::fail('setContext() accepted buckets of 20 s in a time window of 10 s');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('10', $e->getMessage());
        }

        $adapter->setContext(FakeContext::make(40, new FakeStorageKeys('other_')));
        $key = Unique::name('second_');
        $adapter->increment($key);
        self::assertSame(1, $adapter->load($key));
    }
}
