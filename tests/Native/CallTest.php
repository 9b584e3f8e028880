<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The methods Ganesha calls on every request (load, increment, loadStatus,
 * loadLastFailureTime, saveLastFailureTime, saveStatus) have handlers of their own: calls PHP makes in other shapes than the common one (other argument counts, an
 * argument passed by reference, a method called on an adapter without a context) behave as
 * every other method of the class.
 */
final class CallTest extends TestCase
{
    /** @return array<string, array{string, list<mixed>}> each method with arguments it takes */
    public static function hotMethods(): array
    {
        return [
            'load' => ['load', ['k']],
            'increment' => ['increment', ['k']],
            'loadStatus' => ['loadStatus', ['k']],
            'loadLastFailureTime' => ['loadLastFailureTime', ['k']],
            'saveLastFailureTime' => ['saveLastFailureTime', ['k', 1_800_000_000]],
            'saveStatus' => ['saveStatus', ['k', 2]],
        ];
    }

    /**
     * @dataProvider hotMethods
     */
    #[DataProvider('hotMethods')]
    public function testAnotherArgumentCountIsAnArgumentCountError(string $method, array $arguments): void
    {
        $adapter = TestAdapter::forWindow(60);
        $count = \count($arguments);
        foreach ([\array_slice($arguments, 0, -1), [...$arguments, 'more']] as $wrong) {
            try {
                $adapter->{$method}(...$wrong);
                self::fail("{$method}() accepted " . \count($wrong) . ' arguments');
            } catch (\ArgumentCountError $e) {
                self::assertStringContainsString("exactly {$count} argument", $e->getMessage());
            }
        }
    }

    /**
     * @dataProvider hotMethods
     */
    #[DataProvider('hotMethods')]
    public function testWithoutAContextTheCallIsALogicException(string $method, array $arguments): void
    {
        $adapter = new TestAdapter();
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage('setContext()');
        $adapter->{$method}(...$arguments);
    }

    public function testAKeyPassedByReferenceIsReadThroughIt(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('call_ref_');
        $reference = &$key;
        $adapter->increment($reference);
        $adapter->increment($key);
        $arguments = [&$key];
        \call_user_func_array([$adapter, 'increment'], $arguments);
        self::assertSame(3, $adapter->load($reference));
        self::assertSame(1, $adapter->loadStatus($reference));
        $status = 2;
        $byReference = &$status;
        $adapter->saveStatus($reference, $byReference);
        self::assertSame(2, $adapter->loadStatus($key));
        $time = 1_800_000_000;
        $timeReference = &$time;
        $adapter->saveLastFailureTime($reference, $timeReference);
        self::assertSame(1_800_000_000, $adapter->loadLastFailureTime($key));
    }

    public function testATooLongKeyThrowsFromTheCommonCaseToo(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $this->expectException(\RuntimeException::class);
        $this->expectExceptionMessage('ganesha_shm.max_key_length');
        $adapter->increment(\str_repeat('k', 4096));
    }
}
