<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * `__construct()` and `setContext()` have handlers of their own for their common case (no
 * arguments; Ganesha's own Context): every other shape of call behaves as it did through
 * ext-php-rs's generated handlers.
 */
final class ConstructionTest extends TestCase
{
    public function testAnAdapterMadeWithoutArgumentsCounts(): void
    {
        $adapter = new TestAdapter();
        $adapter->setContext(FakeContext::make(60));
        $key = Unique::name('construct_');
        $adapter->increment($key);
        self::assertSame(1, $adapter->load($key));
    }

    public function testConstructingAgainWithoutArgumentsStartsTheAdapterAfresh(): void
    {
        $adapter = TestAdapter::forWindow(60, clock: static fn (): int => 1_800_000_000);
        $adapter->__construct();
        try {
            $adapter->load('k');
            self::fail('the configuration outlived the constructor');
        } catch (\LogicException $e) {
            self::assertStringContainsString('setContext()', $e->getMessage());
        }
    }

    public function testConstructingAgainWithArgumentsTakesThem(): void
    {
        $adapter = new TestAdapter();
        $adapter->__construct(null, static fn (): string => 'not a time');
        $adapter->setContext(FakeContext::make(60));
        $this->expectException(\UnexpectedValueException::class);
        $adapter->load('k');
    }

    public function testASubclassConstructorReachesTheParentsWithAndWithoutArguments(): void
    {
        $without = new class () extends AbstractSlidingTimeWindowShm {
            public function __construct()
            {
                parent::__construct();
            }
        };
        $with = new class () extends AbstractSlidingTimeWindowShm {
            public function __construct()
            {
                parent::__construct(null, static fn (): int => 1_000_000_000);
            }
        };
        // A key each: in one key's ring, the bucket of 2001 and the current one share a position
        // one second in 62, and the later increment would take the other's count.
        $keys = [Unique::name('construct_'), Unique::name('construct_')];
        foreach ([$without, $with] as $i => $adapter) {
            $adapter->setContext(FakeContext::make(60));
            $adapter->increment($keys[$i]);
        }
        self::assertSame(1, $without->load($keys[0]), 'the system clock');
        self::assertSame(1, $with->load($keys[1]), 'the clock given, 2001');
    }

    public function testWrongConstructorArgumentsAreRefusedAsBefore(): void
    {
        $this->expectException(\TypeError::class);
        new TestAdapter('sixty');
    }

    public function testAnAdapterMadeWithoutItsConstructorRefusesCallsWithoutCrashing(): void
    {
        $adapter = (new \ReflectionClass(TestAdapter::class))->newInstanceWithoutConstructor();
        foreach (['setContext' => [FakeContext::make(60)], 'load' => ['k'], 'increment' => ['k']] as $method => $arguments) {
            try {
                $adapter->{$method}(...$arguments);
                self::fail("{$method}() ran on an adapter never constructed");
            } catch (\Throwable $e) {
                self::assertStringContainsString('$this', $e->getMessage());
            }
        }
    }

    public function testSetContextTakesExactlyOneObject(): void
    {
        $adapter = new TestAdapter();
        foreach ([[], [FakeContext::make(60), 'more']] as $wrong) {
            try {
                $adapter->setContext(...$wrong);
                self::fail('setContext() accepted ' . \count($wrong) . ' arguments');
            } catch (\ArgumentCountError $e) {
                self::assertStringContainsString('exactly 1 argument', $e->getMessage());
            }
        }
        $this->expectException(\TypeError::class);
        $adapter->setContext('a context');
    }

    public function testSetContextIsDeclaredAsGaneshasInterfaceCallsIt(): void
    {
        $method = new \ReflectionMethod(AbstractSlidingTimeWindowShm::class, 'setContext');
        self::assertSame(1, $method->getNumberOfRequiredParameters());
        self::assertSame('context', $method->getParameters()[0]->getName());
        self::assertSame('object', (string) $method->getParameters()[0]->getType());
        self::assertSame('void', (string) $method->getReturnType());
        $adapter = new TestAdapter();
        $adapter->setContext(context: FakeContext::make(60));
        self::assertSame(0, $adapter->load(Unique::name('construct_')));
    }
}
