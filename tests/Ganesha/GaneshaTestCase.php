<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Base of the tests of the extension behind the real Ganesha: skipped when Ganesha is not
 * loadable. Every test works on services of its own.
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

    /**
     * A Ganesha of the Rate strategy over a new SlidingTimeWindowShm, whose events land in
     * $this->events.
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
        $ganesha->subscribe(function (string $event, string $service, string $message): void {
            $this->events[] = [$event, $service, $message];
        });

        return $ganesha;
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
}
