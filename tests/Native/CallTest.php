<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The methods Ganesha calls on every request (load, increment, loadStatus) have handlers of
 * their own: calls PHP makes in other shapes than the common one (other argument counts, an
 * argument passed by reference, a method called on an adapter without a context) behave as
 * every other method of the class.
 */
final class CallTest extends TestCase
{
    /** @return array<string, array{string}> */
    public static function hotMethods(): array
    {
        return ['load' => ['load'], 'increment' => ['increment'], 'loadStatus' => ['loadStatus']];
    }

    /**
     * @dataProvider hotMethods
     */
    #[DataProvider('hotMethods')]
    public function testAnotherArgumentCountIsAnArgumentCountError(string $method): void
    {
        $adapter = TestAdapter::forWindow(60);
        foreach ([[], ['a', 'b']] as $arguments) {
            try {
                $adapter->{$method}(...$arguments);
                self::fail("{$method}() accepted " . \count($arguments) . ' arguments');
            } catch (\ArgumentCountError $e) {
                self::assertStringContainsString('exactly 1 argument', $e->getMessage());
            }
        }
    }

    /**
     * @dataProvider hotMethods
     */
    #[DataProvider('hotMethods')]
    public function testWithoutAContextTheCallIsALogicException(string $method): void
    {
        $adapter = new TestAdapter();
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage('setContext()');
        $adapter->{$method}(Unique::name('call_'));
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
    }

    public function testATooLongKeyThrowsFromTheCommonCaseToo(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $this->expectException(\RuntimeException::class);
        $this->expectExceptionMessage('ganesha_shm.max_key_length');
        $adapter->increment(\str_repeat('k', 4096));
    }
}
