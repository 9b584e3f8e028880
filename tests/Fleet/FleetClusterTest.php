<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;


/**
 * Fleet mode on a Redis Cluster of three masters (Debian's redis-server in cluster mode, made
 * by the test with `redis-cli --cluster create`: FleetTestCase::startCluster()).
 */
final class FleetClusterTest extends FleetTestCase
{
    public function testFailuresSpreadOverTheFleetOpenEveryHostOnACluster(): void
    {
        $hosts = $this->startHosts(3, self::GANESHA, $this->startCluster(), ['--cluster']);

        $services = [self::service('cluster'), self::service('cluster'), self::service('cluster')];
        foreach ($services as $service) {
            foreach ($hosts as $host) {
                $host->record($service, 2);
            }
        }
        $after = $this->waitForSyncs($hosts, $this->nowMs());
        foreach ($services as $service) {
            foreach ($hosts as $host) {
                self::assertFalse($host->available($service), "{$host->name} trips on the fleet's failures of {$service}");
                self::assertSame(6, self::fleetCounts($host, $service)['failures'] ?? null);
            }
        }
        // Every key is on the node its hash tag names, with a lifetime.
        $keys = 0;
        foreach ($this->nodes as $node) {
            foreach (\array_filter(\explode("\n", $node->cli(['--scan'])['stdout'])) as $key) {
                self::assertGreaterThan(0, (int) $node->cli(['TTL', $key])['stdout'], $key);
                ++$keys;
            }
        }
        self::assertGreaterThanOrEqual(\count($services), $keys, 'keys for every service');
        self::report("cluster: every host open {$after} ms after the last failure");
    }
}
