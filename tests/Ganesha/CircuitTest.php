<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Storage\Adapter\SlidingTimeWindowInterface;
use Ackintosh\Ganesha\Storage\Adapter\TumblingTimeWindowInterface;
use Ackintosh\Ganesha\Storage\AdapterInterface;
use Ackintosh\Ganesha\Storage\StorageKeys;
use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Forks;

/**
 * The adapter behind Ganesha's Builder::withRateStrategy() (and accepted by withCountStrategy(),
 * see CountStrategyTest), without waiting for time to pass.
 */
final class CircuitTest extends GaneshaTestCase
{
    public function testTheAdapterClass(): void
    {
        $class = new \ReflectionClass(SlidingTimeWindowShm::class);
        self::assertTrue($class->isFinal());
        self::assertSame(AbstractSlidingTimeWindowShm::class, $class->getParentClass()->getName());
        self::assertTrue($class->implementsInterface(AdapterInterface::class));
        self::assertTrue($class->implementsInterface(SlidingTimeWindowInterface::class));
        self::assertFalse($class->implementsInterface(TumblingTimeWindowInterface::class));

        $context = new Ganesha\Context(Ganesha\Strategy\Rate::class, new SlidingTimeWindowShm(), new Ganesha\Configuration([]));
        self::assertSame(Ganesha\Context::STRATEGY_RATE_SLIDING_TIME_WINDOW, $context->strategy());
    }

    public function testTheCountStrategyIsAccepted(): void
    {
        $adapter = new SlidingTimeWindowShm();
        self::assertTrue($adapter->supportCountStrategy());
        $context = new Ganesha\Context(Ganesha\Strategy\Count::class, $adapter, new Ganesha\Configuration([]));
        self::assertSame(Ganesha\Context::STRATEGY_COUNT, $context->strategy());

        $ganesha = Builder::withCountStrategy()
            ->adapter($adapter)
            ->failureCountThreshold(3)
            ->intervalToHalfOpen(10)
            ->build();
        $service = self::service();
        $ganesha->failure($service);
        $ganesha->failure($service);

        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"));
        $adapter->save("ganesha_{$service}_failure", 7);
        $adapter->decrement("ganesha_{$service}_failure");
        self::assertSame(6, $adapter->load("ganesha_{$service}_failure"), 'save() and decrement() work under the Count strategy');
    }

    public function testCountsThroughGaneshaAreExact(): void
    {
        // time window of 60 s in the default 60 buckets
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(timeWindow: 60, failureRateThreshold: 100, minimumRequests: 1000, adapter: $adapter);
        $service = self::service();

        $before = \time();
        for ($i = 0; $i < 7; ++$i) {
            self::assertTrue($ganesha->isAvailable($service));
            $ganesha->failure($service);
        }
        for ($i = 0; $i < 5; ++$i) {
            self::assertTrue($ganesha->isAvailable($service));
            $ganesha->success($service);
        }
        $after = \time();

        self::assertSame(7, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame(5, $adapter->load("ganesha_{$service}_success"));
        self::assertSame(0, $adapter->load("ganesha_{$service}_rejection"));
        $lastFailure = $adapter->loadLastFailureTime("ganesha_{$service}_failure");
        self::assertGreaterThanOrEqual($before, $lastFailure);
        self::assertLessThanOrEqual($after, $lastFailure);
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
        self::assertSame([], $this->events);
    }

    /**
     * @requires extension pcntl
     */
    #[RequiresPhpExtension('pcntl')]
    public function testCountsOfForkedProcessesThroughGaneshaAreExact(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(timeWindow: 60, failureRateThreshold: 100, minimumRequests: 100_000, adapter: $adapter);
        $service = self::service();

        $statuses = Forks::run(4, function () use ($ganesha, $service): int {
            $status = 0;
            for ($i = 0; $i < 250; ++$i) {
                if (!$ganesha->isAvailable($service)) {
                    $status = 1;
                }
                $ganesha->failure($service);
                $ganesha->success($service);
            }

            return $this->events === [] ? $status : 2;
        });
        self::assertSame([0, 0, 0, 0], $statuses, 'exit statuses: 1 = rejected or exception, 2 = Ganesha notified an event');

        self::assertSame(1000, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame(1000, $adapter->load("ganesha_{$service}_success"));
        self::assertSame(0, $adapter->load("ganesha_{$service}_rejection"));
        self::assertTrue($ganesha->isAvailable($service));
    }

    public function testATrippedServiceLeavesOtherServicesAlone(): void
    {
        $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 2);
        $tripped = self::service('a');
        $other = self::service('b');
        $longer = $tripped . 'x';

        $ganesha->success($other);
        $ganesha->success($other);
        $ganesha->failure($tripped);
        $ganesha->failure($tripped);

        self::assertFalse($ganesha->isAvailable($tripped));
        self::assertTrue($ganesha->isAvailable($other));
        self::assertTrue($ganesha->isAvailable($longer));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($tripped));

        // the other service trips on its own failures only
        $ganesha->failure($other);
        self::assertTrue($ganesha->isAvailable($other), '1 failure in 3 requests');
        $ganesha->failure($other);
        self::assertFalse($ganesha->isAvailable($other), '2 failures in 4 requests');
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($other));
        self::assertSame([], $this->eventsOf($longer));
    }

    public function testTwoGaneshasOverTheStoreShareTheCircuits(): void
    {
        // as two php-fpm workers do: the same store, other PHP objects
        $one = $this->ganesha(timeWindow: 60, minimumRequests: 2);
        $two = $this->ganesha(timeWindow: 60, minimumRequests: 2);
        $service = self::service();

        $one->failure($service);
        $two->failure($service);

        self::assertFalse($one->isAvailable($service));
        self::assertFalse($two->isAvailable($service));
    }

    public function testResetClosesTrippedCircuits(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 2, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));

        $ganesha->reset();

        self::assertSame(0, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame(0, $adapter->load("ganesha_{$service}_rejection"));
        self::assertNull($adapter->loadLastFailureTime("ganesha_{$service}_failure"));
        self::assertSame(Ganesha::STATUS_CALMED_DOWN, $adapter->loadStatus("ganesha_{$service}_status"));
        self::assertTrue($ganesha->isAvailable($service));

        // it trips again from zero
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service));
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED, Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    public function testResetLeavesTheCircuitsOfOtherStorageKeys(): void
    {
        $keys = new class () extends StorageKeys {
            public function prefix(): string
            {
                return 'other_ganesha_';
            }
        };
        $adapter = new SlidingTimeWindowShm();
        $other = Builder::withRateStrategy()
            ->adapter($adapter)
            ->storageKeys($keys)
            ->timeWindow(60)
            ->failureRateThreshold(50)
            ->minimumRequests(2)
            ->intervalToHalfOpen(600)
            ->build();
        $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 2);
        $service = self::service();

        foreach ([$ganesha, $other] as $g) {
            $g->failure($service);
            $g->failure($service);
            self::assertFalse($g->isAvailable($service));
        }

        $ganesha->reset();

        self::assertTrue($ganesha->isAvailable($service));
        self::assertFalse($other->isAvailable($service));
        self::assertSame(2, $adapter->load("other_ganesha_{$service}_failure"));

        $other->reset();
        self::assertTrue($other->isAvailable($service));
    }

    /**
     * @return array<string, array{int, int}>
     */
    public static function invalidBuckets(): array
    {
        return [
            'bucket of 20 s in a window of 10 s' => [10, 20],
            '600 buckets' => [600, 1],
            '121 buckets' => [241, 2],
        ];
    }

    /**
     * @dataProvider invalidBuckets
     */
    #[DataProvider('invalidBuckets')]
    public function testBuildRefusesBucketsThatDoNotFitTheWindow(int $timeWindow, int $bucketDuration): void
    {
        $builder = Builder::withRateStrategy()
            ->adapter(new SlidingTimeWindowShm($bucketDuration))
            ->timeWindow($timeWindow)
            ->failureRateThreshold(50)
            ->minimumRequests(2)
            ->intervalToHalfOpen(10);

        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/(?<!\d)' . $timeWindow . '(?!\d)/');
        $builder->build();
    }

    /**
     * @return array<string, array{int, int|null}>
     */
    public static function validBuckets(): array
    {
        return [
            '30 s, default buckets' => [30, null],
            '600 s, default buckets' => [600, null],
            '61 s, default buckets' => [61, null],
            '120 buckets of 1 s' => [120, 1],
            '4 buckets of 3 s' => [10, 3],
            'one bucket' => [600, 600],
        ];
    }

    /**
     * @dataProvider validBuckets
     */
    #[DataProvider('validBuckets')]
    public function testBuildAcceptsBucketsThatFitTheWindow(int $timeWindow, ?int $bucketDuration): void
    {
        $adapter = new SlidingTimeWindowShm($bucketDuration);
        $ganesha = $this->ganesha(timeWindow: $timeWindow, minimumRequests: 2, adapter: $adapter);
        $service = self::service();

        $ganesha->failure($service);
        $ganesha->failure($service);

        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"));
    }

    public function testTheConstructorRefusesABucketDurationBelowOne(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        new SlidingTimeWindowShm(0);
    }

    public function testATooLongServiceNameFailsOpenWithAStorageErrorEvent(): void
    {
        $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 1);
        $service = \str_repeat('s', (int) \ini_get('ganesha_shm.max_key_length'));

        self::assertTrue($ganesha->isAvailable($service), 'fail open');
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertTrue($ganesha->isAvailable($service), 'fail open');
        $ganesha->success($service);

        self::assertSame(
            [Ganesha::EVENT_STORAGE_ERROR, Ganesha::EVENT_STORAGE_ERROR, Ganesha::EVENT_STORAGE_ERROR, Ganesha::EVENT_STORAGE_ERROR, Ganesha::EVENT_STORAGE_ERROR],
            $this->eventsOf($service)
        );
        foreach ($this->events as [, , $message]) {
            self::assertStringContainsString('ganesha_shm.max_key_length', $message);
        }
        self::assertStringStartsWith('failed to isAvailable', $this->events[0][2]);
        self::assertStringStartsWith('failed to record failure', $this->events[1][2]);
        self::assertStringStartsWith('failed to record success', $this->events[4][2]);
    }

    public function testStorageErrorsAreGaneshasStorageException(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $this->ganesha(timeWindow: 60, adapter: $adapter);

        $this->expectException(Ganesha\Exception\StorageException::class);
        $this->expectExceptionMessage('ganesha_shm.max_key_length');
        $adapter->increment(\str_repeat('k', 100_000));
    }
}
