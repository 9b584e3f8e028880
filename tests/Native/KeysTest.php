<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Keys are byte strings up to ganesha_shm.max_key_length bytes; odd input and absurd time
 * windows.
 */
final class KeysTest extends TestCase
{
    private const STORAGE_EXCEPTION = 'Ackintosh\\Ganesha\\Exception\\StorageException';

    private TestAdapter $adapter;

    protected function setUp(): void
    {
        $this->adapter = TestAdapter::forWindow(60);
    }

    public function testTheEmptyKeyWorks(): void
    {
        $count = $this->adapter->load('');
        $this->adapter->increment('');
        $this->adapter->increment('');
        self::assertSame($count + 2, $this->adapter->load(''));

        $this->adapter->saveLastFailureTime('', 77);
        self::assertSame(77, $this->adapter->loadLastFailureTime(''));
        $this->adapter->saveStatus('', 2);
        self::assertSame(2, $this->adapter->loadStatus(''));
        $this->adapter->saveStatus('', 1);
        self::assertSame(1, $this->adapter->loadStatus(''));
    }

    public function testNulBytesAndInvalidUtf8MakeDistinctKeys(): void
    {
        $base = Unique::name('bytes_');
        $keys = [
            $base,
            $base . "\0",
            $base . "\0\0",
            $base . "\0x",
            $base . 'x',
            "\0" . $base,
            $base . "\xff",
            $base . "\xfe",
            $base . "\xc3\x28",
            $base . "\xc3\xa9",            // é in UTF-8
            $base . "\xe9",                // é in Latin-1
            $base . "\x80\x80",
            \strtoupper($base),
        ];
        self::assertCount(\count($keys), \array_unique($keys));

        foreach ($keys as $i => $key) {
            for ($n = 0; $n <= $i; ++$n) {
                $this->adapter->increment($key);
            }
            $this->adapter->saveLastFailureTime($key, 500 + $i);
            $this->adapter->saveStatus($key, 20 + $i);
        }
        foreach ($keys as $i => $key) {
            self::assertSame($i + 1, $this->adapter->load($key), 'count of ' . \bin2hex($key));
            self::assertSame(500 + $i, $this->adapter->loadLastFailureTime($key), 'last failure time of ' . \bin2hex($key));
            self::assertSame(20 + $i, $this->adapter->loadStatus($key), 'status of ' . \bin2hex($key));
        }
    }

    public function testLongKeysDifferingInTheirLastByteAreDistinct(): void
    {
        $max = (int) \ini_get('ganesha_shm.max_key_length');
        $stem = \str_pad(Unique::name('long_'), $max - 1, '.');
        $a = $stem . 'a';
        $b = $stem . 'b';
        self::assertSame($max, \strlen($a));

        $this->adapter->increment($a);
        $this->adapter->increment($b);
        $this->adapter->increment($b);

        self::assertSame(1, $this->adapter->load($a));
        self::assertSame(2, $this->adapter->load($b));
        self::assertSame(0, $this->adapter->load($stem));
    }

    public function testTheDefaultMaximumKeyLength(): void
    {
        self::assertSame('160', \ini_get('ganesha_shm.max_key_length'), 'run the suite without -d ganesha_shm.max_key_length');
        self::assertSame(160, \ganesha_shm_info()['max_key_length']);
    }

    /**
     * @return array<string, array{string, list<mixed>}>
     */
    public static function keyMethods(): array
    {
        return [
            'load' => ['load', []],
            'increment' => ['increment', []],
            'saveLastFailureTime' => ['saveLastFailureTime', [1]],
            'loadLastFailureTime' => ['loadLastFailureTime', []],
            'saveStatus' => ['saveStatus', [2]],
            'loadStatus' => ['loadStatus', []],
        ];
    }

    public function testAKeyOfTheMaximumLengthWorks(): void
    {
        $max = (int) \ini_get('ganesha_shm.max_key_length');
        $key = \str_pad(Unique::name('max_'), $max, '-');
        self::assertSame($max, \strlen($key));

        self::assertSame(0, $this->adapter->load($key));
        self::assertNull($this->adapter->loadLastFailureTime($key));
        self::assertSame(1, $this->adapter->loadStatus($key));
        $this->adapter->increment($key);
        $this->adapter->saveLastFailureTime($key, 3);
        $this->adapter->saveStatus($key, 2);
        self::assertSame(1, $this->adapter->load($key));
        self::assertSame(3, $this->adapter->loadLastFailureTime($key));
        self::assertSame(2, $this->adapter->loadStatus($key));
    }

    /**
     * @dataProvider keyMethods
     * @param list<mixed> $args
     */
    #[DataProvider('keyMethods')]
    public function testAKeyOneByteTooLongIsRefused(string $method, array $args): void
    {
        $max = (int) \ini_get('ganesha_shm.max_key_length');
        $key = \str_pad(Unique::name('over_'), $max + 1, '-');

        $this->assertStorageException(fn () => $this->adapter->{$method}($key, ...$args), 'ganesha_shm.max_key_length');
    }

    /**
     * @dataProvider keyMethods
     * @param list<mixed> $args
     */
    #[DataProvider('keyMethods')]
    public function testA100KbKeyIsRefused(string $method, array $args): void
    {
        $key = \str_repeat("k\0\xff", 34_000);

        $this->assertStorageException(fn () => $this->adapter->{$method}($key, ...$args), 'ganesha_shm.max_key_length');
    }

    public function testARefusedKeyStoresNothing(): void
    {
        $max = (int) \ini_get('ganesha_shm.max_key_length');
        $key = \str_pad(Unique::name('nothing_'), $max + 1, '-');
        $before = \ganesha_shm_info();

        foreach (self::keyMethods() as [$method, $args]) {
            try {
                $this->adapter->{$method}($key, ...$args);
            } catch (\RuntimeException) {
            }
        }

        $after = \ganesha_shm_info();
        self::assertSame($before['counter_slots_used'], $after['counter_slots_used']);
        self::assertSame($before['status_slots_used'], $after['status_slots_used']);
        // the key cut to the maximum length is not what got stored either
        self::assertSame(0, $this->adapter->load(\substr($key, 0, $max)));
    }

    /**
     * @return array<string, array{int}>
     */
    public static function maximumKeyLengths(): array
    {
        return ['a multiple of 8' => [40], 'not a multiple of 8' => [41], 'the smallest' => [8]];
    }

    /**
     * @dataProvider maximumKeyLengths
     */
    #[DataProvider('maximumKeyLengths')]
    public function testTheMaximumKeyLengthIsASetting(int $max): void
    {
        $code = \sprintf(
            '%s $max = %d; $a = new \\%s(); $a->setContext(\\%s::make(60));
            $r = ["info" => ganesha_shm_info()["max_key_length"], "ini" => ini_get("ganesha_shm.max_key_length")];
            $a->increment(str_repeat("a", $max)); $a->increment(str_repeat("a", $max));
            $a->saveStatus(str_repeat("a", $max), 2);
            $r["count"] = $a->load(str_repeat("a", $max));
            $r["status"] = $a->loadStatus(str_repeat("a", $max));
            foreach (["load" => [], "increment" => [], "saveLastFailureTime" => [1], "loadLastFailureTime" => [], "saveStatus" => [2], "loadStatus" => []] as $m => $args) {
                try { $a->$m(str_repeat("a", $max + 1), ...$args); $r[$m] = null; }
                catch (\\Throwable $e) { $r[$m] = [get_class($e), $e->getMessage()]; }
            }
            echo json_encode($r);',
            Php::autoloadCode(),
            $max,
            TestAdapter::class,
            \Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext::class
        );

        $result = Php::json($code, ['ganesha_shm.max_key_length' => $max]);

        self::assertSame((string) $max, $result['ini']);
        self::assertSame(2, $result['count'], "a key of {$max} bytes is counted");
        self::assertSame(2, $result['status'], "a key of {$max} bytes keeps its status");
        foreach (['load', 'increment', 'saveLastFailureTime', 'loadLastFailureTime', 'saveStatus', 'loadStatus'] as $method) {
            self::assertIsArray($result[$method], "{$method}() accepted a key of " . ($max + 1) . " bytes with max_key_length={$max}");
            self::assertSame(\RuntimeException::class, $result[$method][0], "{$method}(): exception class without Ganesha");
            self::assertStringContainsString('ganesha_shm.max_key_length', $result[$method][1]);
        }
        self::assertSame($max, $result['info'], 'ganesha_shm_info() reports the setting');
    }

    public function testInvalidSettingsDoNotPreventPhpFromStarting(): void
    {
        $code = \sprintf(
            '%s $a = new \\%s(); $a->setContext(\\%s::make(60));
            $a->increment("k"); $a->increment("k"); $a->saveStatus("k", 2);
            echo json_encode([$a->load("k"), $a->loadStatus("k")]);',
            Php::autoloadCode(),
            TestAdapter::class,
            \Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext::class
        );
        $cases = [
            ['ganesha_shm.max_services' => 'many', 'ganesha_shm.max_key_length' => '-1'],
            ['ganesha_shm.max_services' => '0', 'ganesha_shm.max_key_length' => '0'],
            ['ganesha_shm.max_services' => '99999999999999999999999', 'ganesha_shm.max_key_length' => '99999999999'],
        ];
        foreach ($cases as $ini) {
            $result = Php::withExtension($code, $ini);
            self::assertSame(0, $result['exit'], \json_encode($ini) . ': ' . $result['stderr']);
            self::assertSame('[2,2]', $result['stdout'], \json_encode($ini) . ': ' . $result['stderr']);
        }
    }

    /**
     * @return array<string, array{mixed}>
     */
    public static function nonStringKeys(): array
    {
        return [
            'int' => [123],
            'float' => [1.5],
            'null' => [null],
            'array' => [['k']],
            'object' => [new \stdClass()],
            'bool' => [true],
        ];
    }

    /**
     * @dataProvider nonStringKeys
     */
    #[DataProvider('nonStringKeys')]
    public function testNonStringKeysAreATypeError(mixed $key): void
    {
        $this->expectException(\TypeError::class);
        $this->adapter->increment($key);
    }

    /**
     * @dataProvider nonStringKeys
     */
    #[DataProvider('nonStringKeys')]
    public function testNonStringKeysAreATypeErrorForLoad(mixed $key): void
    {
        $this->expectException(\TypeError::class);
        $this->adapter->load($key);
    }

    public function testNonIntValuesAreATypeError(): void
    {
        $key = Unique::name('types_');
        foreach ([['saveLastFailureTime', '12'], ['saveLastFailureTime', 1.5], ['saveStatus', '2'], ['saveStatus', null]] as [$method, $value]) {
            try {
                $this->adapter->{$method}($key, $value);
                self::fail("{$method}() accepted " . \var_export($value, true));
            } catch (\TypeError $e) {
                self::assertNotSame('', $e->getMessage());
            }
        }
        self::assertNull($this->adapter->loadLastFailureTime($key));
        self::assertSame(1, $this->adapter->loadStatus($key));
    }

    /**
     * @return array<string, array{int}>
     */
    public static function absurdWindows(): array
    {
        return ['one second' => [1], 'a billion seconds' => [1_000_000_000]];
    }

    /**
     * @dataProvider absurdWindows
     */
    #[DataProvider('absurdWindows')]
    public function testAbsurdTimeWindowsWork(int $timeWindow): void
    {
        $adapter = TestAdapter::forWindow($timeWindow);

        // a window of 1 s holds one second: count within one second of time()
        for ($attempt = 0; $attempt < 3; ++$attempt) {
            $key = Unique::name('absurd_');
            $second = \time();
            $adapter->increment($key);
            $adapter->increment($key);
            $adapter->increment($key);
            $count = $adapter->load($key);
            if (\time() === $second) {
                break;
            }
        }

        self::assertSame(3, $count);
        $adapter->saveLastFailureTime($key, 99);
        self::assertSame(99, $adapter->loadLastFailureTime($key));
    }

    public function testOutlandishWindowsAreRefusedOrWorkButNeverCrash(): void
    {
        $code = \sprintf(
            '%s $r = [];
            foreach ([[PHP_INT_MAX, null], [PHP_INT_MAX, 1], [PHP_INT_MAX, PHP_INT_MAX], [PHP_INT_MAX - 1, 2], [0, null], [-5, null], [PHP_INT_MIN, null], [PHP_INT_MIN, 1]] as [$window, $bucket]) {
                $case = $window . "/" . var_export($bucket, true);
                try {
                    $a = new \\%s($bucket);
                    $a->setContext(\\%s::make($window));
                    $k = "outlandish" . $case;
                    $a->increment($k);
                    $a->saveLastFailureTime($k, 99);
                    $r[$case] = ["ok", $a->load($k), $a->loadLastFailureTime($k)];
                } catch (\\Throwable $e) {
                    $r[$case] = [get_class($e), $e->getMessage()];
                }
            }
            echo json_encode($r);',
            Php::autoloadCode(),
            TestAdapter::class,
            \Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext::class
        );

        $result = Php::json($code);

        self::assertCount(8, $result);
        foreach ($result as $case => $outcome) {
            if ($outcome[0] === 'ok') {
                self::assertSame(['ok', 1, 99], $outcome, "time window/bucket duration {$case} works but does not count");
            } else {
                self::assertSame(\InvalidArgumentException::class, $outcome[0], "time window/bucket duration {$case}: {$outcome[1]}");
            }
        }
        foreach (['0/NULL', '-5/NULL', '-9223372036854775808/NULL', '-9223372036854775808/1'] as $case) {
            self::assertSame(\InvalidArgumentException::class, $result[$case][0], "a time window below 1 s ({$case}) is refused");
        }
    }

    private function assertStorageException(callable $call, string $needle): void
    {
        $expected = \class_exists(self::STORAGE_EXCEPTION) ? self::STORAGE_EXCEPTION : \RuntimeException::class;
        try {
            $call();
            self::fail('no exception');
        } catch (\RuntimeException $e) {
            self::assertSame($expected, \get_class($e));
            self::assertStringContainsString($needle, $e->getMessage());
        }
    }
}
