<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Clock;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Events leave the window as it slides, bucket by bucket; a last failure time is kept
 * (bucketCount + 1) * bucketDuration seconds after its save. Real time passes: the test is
 * aligned to second boundaries of time(), buckets being floor(time() / bucketDuration).
 */
final class SlidingWindowTest extends TestCase
{
    public function testEventsLeaveTheWindowAsItSlides(): void
    {
        // time window 2 s in buckets of 1 s: load() at second s sums seconds s-1 and s
        $adapter = TestAdapter::forWindow(2, 1);
        // time window 4 s in buckets of 2 s: load() sums buckets floor(s/2)-1 and floor(s/2)
        $wide = TestAdapter::forWindow(4, 2);
        $key = Unique::name('slide_');
        $wideKey = Unique::name('slide_wide_');
        $lft = Unique::name('slide_lft_');

        $t0 = Clock::nextSecondWhere(2, 0);
        $adapter->increment($key);
        $adapter->increment($key);
        $adapter->increment($key);
        $wide->increment($wideKey);
        $adapter->saveLastFailureTime($lft, 1234);
        self::assertSame(3, $adapter->load($key));
        self::assertSame(1234, $adapter->loadLastFailureTime($lft));
        self::assertSame($t0, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 1);
        $adapter->increment($key);
        $adapter->increment($key);
        $wide->increment($wideKey);
        self::assertSame(5, $adapter->load($key), 'at +1 s: buckets +0 and +1');
        self::assertSame(2, $wide->load($wideKey), 'at +1 s: wide bucket +0');
        self::assertSame($t0 + 1, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 2);
        $wide->increment($wideKey);
        self::assertSame(2, $adapter->load($key), 'at +2 s: the bucket of +0 left the window');
        self::assertSame(3, $wide->load($wideKey), 'at +2 s: wide buckets +0 and +2');
        self::assertSame(1234, $adapter->loadLastFailureTime($lft), 'at +2 s the last failure time is kept');
        self::assertSame($t0 + 2, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 3);
        self::assertSame(0, $adapter->load($key), 'at +3 s: every event left the window');
        self::assertSame(1234, $adapter->loadLastFailureTime($lft), 'at +3 s (= (2 + 1) * 1 s) the last failure time is kept');
        self::assertSame(3, $wide->load($wideKey), 'at +3 s: wide buckets +0 and +2');
        self::assertSame($t0 + 3, \time(), 'the clock passed a second: the machine is too slow for this test');

        Clock::sleepUntil($t0 + 4);
        self::assertNull($adapter->loadLastFailureTime($lft), 'at +4 s the last failure time is gone');
        self::assertSame(1, $wide->load($wideKey), 'at +4 s: the wide bucket of +0 left the window');
        self::assertSame(0, $adapter->load($key));
        self::assertSame($t0 + 4, \time(), 'the clock passed a second: the machine is too slow for this test');

        // the key is still usable after its events expired
        $adapter->increment($key);
        self::assertSame(1, $adapter->load($key));
    }
}
