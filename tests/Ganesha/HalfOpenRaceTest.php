<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * One half-open trial per interval, however many processes ask at once: Ganesha checks the
 * last failure time, then writes the current time, and the adapter's loadLastFailureTime()
 * claims the trial in between with one compare-and-swap.
 *
 * Each round trips a new service, lets the interval to half-open pass on the VirtualClock, and
 * forks processes that call isAvailable() at the same instant on the real store: exactly one
 * may pass. The processes race for real; only the time they read is set by the test.
 *
 * @requires extension pcntl
 * @requires extension posix
 */
#[RequiresPhpExtension('pcntl')]
#[RequiresPhpExtension('posix')]
final class HalfOpenRaceTest extends GaneshaTestCase
{
    private const ROUNDS = 20;

    private const CHILDREN = 16;

    private const INTERVAL = 5;

    public function testOneTrialUnderTheRateStrategy(): void
    {
        $adapter = self::virtualAdapter(\time());
        for ($round = 0; $round < self::ROUNDS; ++$round) {
            $ganesha = $this->ganesha(timeWindow: 60, minimumRequests: 2, intervalToHalfOpen: self::INTERVAL, adapter: $adapter);
            $service = self::service();
            $this->trip($ganesha, $service);
            $rejections = $adapter->load("ganesha_{$service}_rejection");

            VirtualClock::sleep(self::INTERVAL + 1);
            self::assertSame(1, $this->admittedAtOnce($ganesha, $service, self::CHILDREN), "round {$round}: processes let through");

            self::assertSame(VirtualClock::now(), $this->storedLastFailureTime($service), "round {$round}: the trial restarted the interval");
            self::assertSame($rejections + self::CHILDREN - 1, $adapter->load("ganesha_{$service}_rejection"), "round {$round}: the others were rejected");
            self::assertFalse($ganesha->isAvailable($service), "round {$round}: no second trial");
        }
    }

    public function testOneTrialUnderTheCountStrategy(): void
    {
        $adapter = self::virtualAdapter(\time());
        for ($round = 0; $round < self::ROUNDS; ++$round) {
            $ganesha = $this->countGanesha(failureCountThreshold: 2, intervalToHalfOpen: self::INTERVAL, adapter: $adapter);
            $service = self::service();
            $this->trip($ganesha, $service);

            VirtualClock::sleep(self::INTERVAL + 1);
            self::assertSame(1, $this->admittedAtOnce($ganesha, $service, self::CHILDREN), "round {$round}: processes let through");

            self::assertSame(VirtualClock::now(), $this->storedLastFailureTime($service), "round {$round}: the trial restarted the interval");
            self::assertSame(2, $adapter->load("ganesha_{$service}_failure"), "round {$round}: the trial set the count to the threshold");
            self::assertFalse($ganesha->isAvailable($service), "round {$round}: no second trial");
        }
    }

    private function trip(Ganesha $ganesha, string $service): void
    {
        $ganesha->failure($service);
        $ganesha->failure($service);
        self::assertFalse($ganesha->isAvailable($service));
        self::assertSame([Ganesha::EVENT_TRIPPED], $this->eventsOf($service));
    }

    /** The last failure time stored for $service, read without claiming a trial. */
    private function storedLastFailureTime(string $service): ?int
    {
        // an interval to half-open that never passes: a plain read
        $peek = new SlidingTimeWindowShm(null, VirtualClock::callable());
        $this->ganesha(timeWindow: 60, intervalToHalfOpen: \PHP_INT_MAX, adapter: $peek);

        return $peek->loadLastFailureTime("ganesha_{$service}_failure");
    }
}
