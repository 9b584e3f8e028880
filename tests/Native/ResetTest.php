<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeStorageKeys;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * reset() deletes the counts, last failure times and statuses of the keys made of the
 * configured prefix, at least one byte, and one of the five configured suffixes; nothing else.
 * Prefixes and suffixes are literal bytes.
 */
final class ResetTest extends TestCase
{
    /**
     * @return array<string, array{FakeStorageKeys}>
     */
    public static function storageKeys(): array
    {
        return [
            'unique prefix, Ganesha suffixes' => [new FakeStorageKeys(Unique::name('rst') . '_')],
            'regex metacharacters' => [new FakeStorageKeys(
                '.*[(' . Unique::name('') . '^',
                '$',
                '.+',
                '(?i)|',
                '\\E\\Q',
                '[^a]{2}/#~',
            )],
            'NUL bytes' => [new FakeStorageKeys(
                "\0" . Unique::name('') . "\0",
                "\0s",
                "\0f\0",
                "\0\0r",
                "\0l",
                "s\0",
            )],
            'invalid UTF-8 and percent signs' => [new FakeStorageKeys(
                "\xff\xfe" . Unique::name('') . '%s',
                "\xc3\x28",
                '%d',
                "\x80",
                '%%',
                "\xf0\x9f\x98",
            )],
        ];
    }

    /**
     * @dataProvider storageKeys
     */
    #[DataProvider('storageKeys')]
    public function testResetDeletesOnlyTheKeysOfTheConfiguredPrefixAndSuffixes(FakeStorageKeys $keys): void
    {
        $adapter = TestAdapter::forWindow(60, null, $keys);
        $prefix = $keys->prefix();
        [$success, $failure, $rejection, $lastFailureTime, $status] = $keys->suffixes();

        $deleted = [
            $prefix . 'svc' . $success,
            $prefix . 'svc' . $failure,
            $prefix . 'svc' . $rejection,
            $prefix . 'svc' . $lastFailureTime,
            $prefix . 'svc' . $status,
            $prefix . 'x' . $failure,                      // one byte between
            $prefix . "\0" . $failure,                     // a NUL byte between
            $prefix . $failure . $failure,                 // the suffix between
            $prefix . $prefix . $status,                   // the prefix between
            $prefix . 'svc.12345' . $failure,              // a key of a previous time window
        ];
        $kept = [
            $prefix . $failure,                            // nothing between
            $prefix . $status,
            $prefix . 'svc',                               // no suffix
            $prefix . 'svc' . $failure . 'x',              // suffix not at the end
            'x' . $prefix . 'svc' . $failure,              // prefix not at the start
            \substr($prefix, 0, -1) . 'svc' . $failure,    // prefix cut short
            $prefix . 'svc' . \substr($failure, 1),        // suffix cut short
            \strtoupper($prefix) . 'svc' . $failure,       // other case
            'other_' . $prefix . 'svc' . $status,
            Unique::name('unrelated_') . '_failure',
        ];
        $kept = \array_values(\array_filter(
            $kept,
            static fn (string $key): bool => !self::isResetKey($key, $keys)
        ));
        self::assertGreaterThanOrEqual(7, \count($kept), 'the data set leaves keys to keep');
        foreach ($deleted as $key) {
            self::assertTrue(self::isResetKey($key, $keys), 'the data set deletes ' . \bin2hex($key));
        }

        $this->store($adapter, \array_merge($deleted, $kept));
        foreach (\array_merge($deleted, $kept) as $i => $key) {
            $this->assertStored($adapter, $key, $i, 'before reset()');
        }

        $adapter->reset();

        foreach ($deleted as $key) {
            self::assertSame(0, $adapter->load($key), 'count of ' . \bin2hex($key) . ' after reset()');
            self::assertNull($adapter->loadLastFailureTime($key), 'last failure time of ' . \bin2hex($key) . ' after reset()');
            self::assertSame(1, $adapter->loadStatus($key), 'status of ' . \bin2hex($key) . ' after reset()');
        }
        foreach ($kept as $i => $key) {
            $this->assertStored($adapter, $key, \count($deleted) + $i, 'after reset()');
        }

        // deleted keys work again from zero
        $adapter->increment($deleted[1]);
        self::assertSame(1, $adapter->load($deleted[1]));

    }

    public function testResetWithDefaultKeysLeavesOtherPrefixes(): void
    {
        $default = TestAdapter::forWindow(60);
        $otherKeys = new FakeStorageKeys(Unique::name('other') . '_');
        $other = TestAdapter::forWindow(60, null, $otherKeys);
        $service = Unique::name('svc');

        $mine = ['ganesha_' . $service . '_failure', 'ganesha_' . $service . '_success', 'ganesha_' . $service . '_status'];
        $theirs = [$otherKeys->prefix() . $service . '_failure', $otherKeys->prefix() . $service . '_status'];
        $this->store($default, \array_merge($mine, $theirs));

        $default->reset();

        foreach ($mine as $key) {
            self::assertSame(0, $default->load($key));
            self::assertNull($default->loadLastFailureTime($key));
            self::assertSame(1, $default->loadStatus($key));
        }
        foreach ($theirs as $i => $key) {
            $this->assertStored($other, $key, \count($mine) + $i, 'after reset() of another prefix');
        }

        $other->reset();
        foreach ($theirs as $key) {
            self::assertSame(0, $other->load($key));
            self::assertSame(1, $other->loadStatus($key));
        }
    }

    public function testResetWithNothingToDeleteIsHarmless(): void
    {
        $adapter = TestAdapter::forWindow(60, null, new FakeStorageKeys(Unique::name('empty') . '_'));
        $unrelated = Unique::name('unrelated_') . '_failure';
        $this->store($adapter, [$unrelated]);

        $adapter->reset();
        $adapter->reset();

        $this->assertStored($adapter, $unrelated, 0, 'after two reset() of another prefix');
    }

    /** Stores count $i + 1, last failure time 1000 + $i and status 10 + $i under each key. */
    private function store(TestAdapter $adapter, array $keys): void
    {
        foreach (\array_values($keys) as $i => $key) {
            for ($n = 0; $n <= $i; ++$n) {
                $adapter->increment($key);
            }
            $adapter->saveLastFailureTime($key, 1000 + $i);
            $adapter->saveStatus($key, 10 + $i);
        }
    }

    private function assertStored(TestAdapter $adapter, string $key, int $i, string $when): void
    {
        $name = \bin2hex($key);
        self::assertSame($i + 1, $adapter->load($key), "count of {$name} {$when}");
        self::assertSame(1000 + $i, $adapter->loadLastFailureTime($key), "last failure time of {$name} {$when}");
        self::assertSame(10 + $i, $adapter->loadStatus($key), "status of {$name} {$when}");
    }

    private static function isResetKey(string $key, FakeStorageKeys $keys): bool
    {
        $prefix = $keys->prefix();
        if (!\str_starts_with($key, $prefix)) {
            return false;
        }
        foreach ($keys->suffixes() as $suffix) {
            if (\strlen($key) > \strlen($prefix) + \strlen($suffix) && \str_ends_with($key, $suffix)) {
                return true;
            }
        }

        return false;
    }
}
