<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeConfiguration;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * What the adapter supports, and what it refuses: the Count strategy's save() and
 * decrement() under the Rate strategy, any use of the store before setContext(), and contexts
 * that are not Ganesha's.
 */
final class ContractTest extends TestCase
{
    public function testSupportsTheRateAndTheCountStrategies(): void
    {
        $adapter = new TestAdapter();
        self::assertTrue($adapter->supportRateStrategy());
        self::assertTrue($adapter->supportCountStrategy());

        $adapter->setContext(FakeContext::make(60));
        self::assertTrue($adapter->supportRateStrategy());
        self::assertTrue($adapter->supportCountStrategy());

        $adapter->setContext(FakeContext::count());
        self::assertTrue($adapter->supportRateStrategy());
        self::assertTrue($adapter->supportCountStrategy());
    }

    public function testSaveIsRefusedUnderTheRateStrategy(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('save_');
        $adapter->increment($key);
        $adapter->increment($key);

        try {
            $adapter->save($key, 10);
            self::fail('save() did not throw');
        } catch (\LogicException $e) {
            self::assertStringContainsString('save()', $e->getMessage());
        }
        self::assertSame(2, $adapter->load($key));
    }

    public function testDecrementIsRefusedUnderTheRateStrategy(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('decrement_');
        $adapter->increment($key);
        $adapter->increment($key);

        try {
            $adapter->decrement($key);
            self::fail('decrement() did not throw');
        } catch (\LogicException $e) {
            self::assertStringContainsString('decrement()', $e->getMessage());
        }
        self::assertSame(2, $adapter->load($key));
    }

    public function testTheStrategyIsTheOneOfTheLastSetContext(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('switch_');

        $adapter->setContext(FakeContext::count());
        $adapter->save($key, 7);
        $adapter->decrement($key);
        self::assertSame(6, $adapter->load($key));

        $adapter->setContext(FakeContext::make(60));
        self::assertSame(0, $adapter->load($key), 'the Rate strategy counts events in buckets, not the counter');
        try {
            $adapter->save($key, 1);
            self::fail('save() did not throw under the Rate strategy');
        } catch (\LogicException $e) {
            self::assertNotSame('', $e->getMessage());
        }

        $adapter->setContext(FakeContext::count());
        self::assertSame(6, $adapter->load($key));
    }

    public function testSaveAndDecrementAreRefusedBeforeSetContextToo(): void
    {
        $adapter = new TestAdapter();
        foreach (['save' => [Unique::name('k'), 1], 'decrement' => [Unique::name('k')]] as $method => $args) {
            try {
                $adapter->{$method}(...$args);
                self::fail("{$method}() did not throw");
            } catch (\LogicException $e) {
                self::assertNotSame('', $e->getMessage());
            }
        }
    }

    /**
     * @return array<string, array{string, list<mixed>}>
     */
    public static function storeMethods(): array
    {
        return [
            'load' => ['load', ['k']],
            'increment' => ['increment', ['k']],
            'saveLastFailureTime' => ['saveLastFailureTime', ['k', 1]],
            'loadLastFailureTime' => ['loadLastFailureTime', ['k']],
            'saveStatus' => ['saveStatus', ['k', 2]],
            'loadStatus' => ['loadStatus', ['k']],
            'reset' => ['reset', []],
        ];
    }

    /**
     * @dataProvider storeMethods
     * @param list<mixed> $args
     */
    #[DataProvider('storeMethods')]
    public function testUseBeforeSetContextIsRefused(string $method, array $args): void
    {
        $adapter = new TestAdapter();
        $this->expectException(\LogicException::class);
        $adapter->{$method}(...$args);
    }

    public function testSetConfigurationDoesNothing(): void
    {
        $adapter = new TestAdapter();
        $adapter->setConfiguration(new \stdClass());
        $adapter->setConfiguration(FakeContext::make(60)->configuration());

        try {
            $adapter->load('k');
            self::fail('setConfiguration() stood in for setContext()');
        } catch (\LogicException $e) {
            self::assertNotSame('', $e->getMessage());
        }

        $adapter->setContext(FakeContext::make(60));
        $adapter->setConfiguration(new \stdClass());
        $key = Unique::name('conf_');
        $adapter->increment($key);
        self::assertSame(1, $adapter->load($key));
    }

    public function testAContextWithoutTheExpectedMethodsIsRefused(): void
    {
        $adapter = new TestAdapter();
        $this->expectException(\InvalidArgumentException::class);
        $adapter->setContext(new \stdClass());
    }

    public function testAContextWithoutStrategyIsRefused(): void
    {
        $context = new class () {
            public function configuration(): FakeConfiguration
            {
                return FakeContext::make(60)->configuration();
            }
        };

        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('strategy()');
        (new TestAdapter())->setContext($context);
    }

    public function testAConfigurationWithoutIntervalToHalfOpenIsTakenAndClaimsNoTrial(): void
    {
        $context = new class () {
            public function strategy(): string
            {
                return FakeContext::RATE;
            }

            public function configuration(): object
            {
                return new class () {
                    public function timeWindow(): int
                    {
                        return 60;
                    }

                    public function storageKeys(): FakeStorageKeys
                    {
                        return new FakeStorageKeys();
                    }
                };
            }
        };

        // As Ganesha's own adapters, which never read it: the last failure time is read as
        // stored, with no half-open trial to claim.
        $adapter = new TestAdapter();
        $adapter->setContext($context);
        $key = Unique::name('no_interval_');
        $failedAt = \time() - 3600;
        $adapter->saveLastFailureTime($key, $failedAt);
        self::assertSame($failedAt, $adapter->loadLastFailureTime($key));
        self::assertSame($failedAt, $adapter->loadLastFailureTime($key), 'read, not claimed');
    }

    public function testTheCountStrategyDoesNotAskForATimeWindow(): void
    {
        // FakeConfiguration::timeWindow() throws for a Count configuration, as Ganesha's does
        $adapter = new TestAdapter();
        $adapter->setContext(FakeContext::count());
        $key = Unique::name('count_ctx_');
        $adapter->increment($key);
        self::assertSame(1, $adapter->load($key));
    }
}
