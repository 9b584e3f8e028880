<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * What the adapter supports, and what it refuses: the Count strategy's save() and
 * decrement(), and any use of the store before setContext().
 */
final class ContractTest extends TestCase
{
    public function testSupportsTheRateStrategyOnly(): void
    {
        $adapter = new TestAdapter();
        self::assertTrue($adapter->supportRateStrategy());
        self::assertFalse($adapter->supportCountStrategy());

        $adapter->setContext(FakeContext::make(60));
        self::assertTrue($adapter->supportRateStrategy());
        self::assertFalse($adapter->supportCountStrategy());
    }

    public function testSaveIsRefused(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('save_');
        $adapter->increment($key);
        $adapter->increment($key);

        try {
            $adapter->save($key, 10);
            self::fail('save() did not throw');
        } catch (\LogicException $e) {
            self::assertNotSame('', $e->getMessage());
        }
        self::assertSame(2, $adapter->load($key));
    }

    public function testDecrementIsRefused(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('decrement_');
        $adapter->increment($key);
        $adapter->increment($key);

        try {
            $adapter->decrement($key);
            self::fail('decrement() did not throw');
        } catch (\LogicException $e) {
            self::assertNotSame('', $e->getMessage());
        }
        self::assertSame(2, $adapter->load($key));
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
        $this->expectException(\Throwable::class);
        $adapter->setContext(new \stdClass());
    }
}
