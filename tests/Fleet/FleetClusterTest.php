<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;

/**
 * Fleet mode on a Redis Cluster of three masters (Debian's redis-server in cluster mode, made
 * by the test with `redis-cli --cluster create`).
 */
final class FleetClusterTest extends FleetTestCase
{
    public function testFailuresSpreadOverTheFleetOpenEveryHostOnACluster(): void
    {
        for ($i = 0; $i < 3; ++$i) {
            $this->nodes[] = RedisServer::start($this->dir, true);
        }
        $addresses = \array_map(fn (RedisServer $node) => '127.0.0.1:' . $node->port, $this->nodes);
        $created = Command::run([(string) RedisServer::binary('redis-cli'), '--cluster', 'create', ...$addresses, '--cluster-replicas', '0', '--cluster-yes'], timeout: 30.0);
        self::assertSame(0, $created['exit'], $created['stdout'] . $created['stderr']);
        foreach ($this->nodes as $node) {
            $this->waitUntil(fn () => \str_contains($node->cli(['CLUSTER', 'INFO'])['stdout'], 'cluster_state:ok'), "node {$node->port} is ready");
        }
        $urls = \implode(',', \array_map(fn (RedisServer $node) => $node->url(), $this->nodes));
        $hosts = $this->startHosts(3, self::GANESHA, $urls, ['--cluster']);

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
