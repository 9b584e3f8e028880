<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Configuration;
use Ackintosh\Ganesha\Context;
use Ackintosh\Ganesha\Strategy\Rate;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

/**
 * setContext() reads Ganesha's own Context and Configuration from their properties, which their
 * getters return as they are; an object of any other class, a subclass included, is read
 * through its getters. Shown with a bucket duration that fits one time window and not the other.
 */
final class ContextTest extends GaneshaTestCase
{
    private const PARAMS = ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => 2, 'intervalToHalfOpen' => 5];

    public function testGaneshasOwnConfigurationGivesItsTimeWindow(): void
    {
        $adapter = new SlidingTimeWindowShm(bucketDuration: 20);
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(self::PARAMS)));

        $service = self::service('context');
        $adapter->increment("ganesha_{$service}_failure");
        self::assertCount(3, $adapter->snapshot(buckets: true)[$service]['buckets'], 'a 60 s window of 20 s buckets');
    }

    public function testAConfigurationSubclassIsReadThroughItsGetters(): void
    {
        $configuration = new class (self::PARAMS) extends Configuration {
            public function timeWindow(): int
            {
                return 10;
            }
        };
        $adapter = new SlidingTimeWindowShm(bucketDuration: 20);

        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/\b20\b.*\b10\b/');
        $adapter->setContext(new Context(Rate::class, $adapter, $configuration));
    }

    public function testTheSameConfigurationGivenAgainAfterAnotherGivesItsOwnWindow(): void
    {
        $adapter = new SlidingTimeWindowShm(bucketDuration: 20);
        $service = self::service('context');
        $buckets = static fn (): int => \count($adapter->snapshot(buckets: true)[$service]['buckets']);

        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(['timeWindow' => 120] + self::PARAMS)));
        $adapter->increment("ganesha_{$service}_failure");
        self::assertSame(6, $buckets());
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(self::PARAMS)));
        self::assertSame(3, $buckets());
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(['timeWindow' => 120] + self::PARAMS)));
        self::assertSame(6, $buckets());
    }

    /**
     * Ganesha's own adapter tests build a Context by hand with only a time window; Ganesha's
     * adapters take it, and so does this one: it counts, loads, keeps a status, and gives the
     * last failure time back as stored (no interval to half-open, so no trial to claim).
     */
    public function testAContextBuiltByHandWithOnlyATimeWindowIsTaken(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(['timeWindow' => 3])));

        $service = self::service('by-hand');
        $adapter->increment("ganesha_{$service}_failure");
        $adapter->increment("ganesha_{$service}_failure");
        self::assertSame(2, $adapter->load("ganesha_{$service}_failure"));
        self::assertSame(0, $adapter->load("ganesha_{$service}_success"));
        $adapter->saveStatus("ganesha_{$service}_status", Ganesha::STATUS_TRIPPED);
        self::assertSame(Ganesha::STATUS_TRIPPED, $adapter->loadStatus("ganesha_{$service}_status"));
        $failedAt = \time() - 3600;
        $adapter->saveLastFailureTime("ganesha_{$service}_last_failure_time", $failedAt);
        self::assertSame($failedAt, $adapter->loadLastFailureTime("ganesha_{$service}_last_failure_time"));
        self::assertSame($failedAt, $adapter->loadLastFailureTime("ganesha_{$service}_last_failure_time"), 'read, not claimed');
    }

    public function testGaneshasOwnConfigurationWithAWindowTheBucketsDoNotFitIsRefused(): void
    {
        $adapter = new SlidingTimeWindowShm(bucketDuration: 20);
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(self::PARAMS)));

        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessageMatches('/\b20\b.*\b10\b/');
        $adapter->setContext(new Context(Rate::class, $adapter, new Configuration(['timeWindow' => 10] + self::PARAMS)));
    }
}
