<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Forks;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;
use Zeusi\GaneshaShmAdapter\Tests\Support\VirtualClock;

/**
 * Base of the tests of the extension behind the real Ganesha: skipped when Ganesha is not
 * loadable. Every test works on services of its own. The VirtualClock is reset after each test.
 */
abstract class GaneshaTestCase extends TestCase
{
    /** @var list<array{string, string, string}> events Ganesha notified: [event, service, message] */
    protected array $events = [];

    protected function setUp(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->events = [];
    }

    protected function tearDown(): void
    {
        VirtualClock::reset();
    }

    /**
     * A Ganesha of the Rate strategy over a new SlidingTimeWindowShm (on the system clock), whose
     * events land in $this->events.
     */
    protected function ganesha(
        int $timeWindow,
        int $failureRateThreshold = 50,
        int $minimumRequests = 2,
        int $intervalToHalfOpen = 600,
        ?SlidingTimeWindowShm $adapter = null,
    ): Ganesha {
        $ganesha = Builder::withRateStrategy()
            ->adapter($adapter ?? new SlidingTimeWindowShm())
            ->timeWindow($timeWindow)
            ->failureRateThreshold($failureRateThreshold)
            ->minimumRequests($minimumRequests)
            ->intervalToHalfOpen($intervalToHalfOpen)
            ->build();

        return $this->subscribed($ganesha);
    }

    /**
     * A Ganesha of the Count strategy over a new SlidingTimeWindowShm (on the system clock),
     * whose events land in $this->events.
     */
    protected function countGanesha(
        int $failureCountThreshold,
        int $intervalToHalfOpen = 600,
        ?SlidingTimeWindowShm $adapter = null,
    ): Ganesha {
        $ganesha = Builder::withCountStrategy()
            ->adapter($adapter ?? new SlidingTimeWindowShm())
            ->failureCountThreshold($failureCountThreshold)
            ->intervalToHalfOpen($intervalToHalfOpen)
            ->build();

        return $this->subscribed($ganesha);
    }

    /**
     * An adapter on the VirtualClock, which Ganesha's strategies read too: the clock stops at
     * $time, and tests move it with VirtualClock::sleep().
     */
    protected static function virtualAdapter(int $time, ?int $bucketDuration = null): SlidingTimeWindowShm
    {
        self::assertTrue(VirtualClock::isInstalledInGanesha(), 'tests/bootstrap.php installs the VirtualClock in Ganesha');
        VirtualClock::freeze($time);

        return new SlidingTimeWindowShm($bucketDuration, VirtualClock::callable());
    }

    protected static function service(string $stem = 'svc'): string
    {
        return Unique::name($stem . '.');
    }

    /** @return list<string> the names of the events notified for $service */
    protected function eventsOf(string $service): array
    {
        $events = [];
        foreach ($this->events as [$event, $of]) {
            if ($of === $service) {
                $events[] = $event;
            }
        }

        return $events;
    }

    /**
     * Forks $children processes that all call $ganesha->isAvailable($service) once, at the same
     * instant, and returns how many were let through. Fails if a child failed, or if Ganesha
     * notified any event in a child.
     */
    protected function admittedAtOnce(Ganesha $ganesha, string $service, int $children): int
    {
        $events = \count($this->events);
        $statuses = Forks::run($children, function () use ($ganesha, $service, $events): int {
            $available = $ganesha->isAvailable($service);

            return \count($this->events) !== $events ? 2 : ($available ? 10 : 11);
        });

        $admitted = 0;
        foreach ($statuses as $child => $status) {
            self::assertContains($status, [10, 11], "child {$child}: -1 = killed, 1 = exception, 2 = Ganesha notified an event");
            $admitted += $status === 10 ? 1 : 0;
        }

        return $admitted;
    }

    private function subscribed(Ganesha $ganesha): Ganesha
    {
        $ganesha->subscribe(function (string $event, string $service, string $message): void {
            $this->events[] = [$event, $service, $message];
        });

        return $ganesha;
    }
}
