<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\FleetHost;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisTls;
use Zeusi\GaneshaShmAdapter\Tests\Support\TlsFiles;

/**
 * Fleet mode on a self-run Redis made highly available by Sentinel, the usual set-up of one that
 * is not a Cluster: Debian's redis-sentinel, three Sentinels watching a master (the test's
 * redis-server) and its one replica, all on loopback ports. The sidecars find the master through
 * the Sentinels (--sentinel), and follow a failover to the replica the Sentinels promote: over
 * plain TCP without passwords, and over TLS with a password everywhere.
 */
final class FleetSentinelTest extends FleetTestCase
{
    private const MASTER = 'mymaster';

    protected function setUp(): void
    {
        parent::setUp();
        if (RedisServer::binary('redis-sentinel') === null) {
            self::markTestSkipped('redis-sentinel is not installed (apt-get install redis-sentinel)');
        }
    }

    /** The failover over plain TCP, no server or Sentinel requiring a password. */
    public function testTheHostsDecideAloneWhenTheMasterIsKilledAndFollowTheFailoverToTheReplica(): void
    {
        [$sentinels, $replica] = $this->startSentinels();
        $this->assertTheHostsDecideAloneAndFollowTheFailover($sentinels, $replica, [], 'Sentinel');
    }

    /**
     * The first Sentinel of the list hung (SIGSTOP: the kernel still accepts its connections,
     * and nothing answers): each attempt asks it first, waits out the command timeout, and asks
     * the next, so that the hosts share their counts all the same; the hung Sentinel never hangs
     * a sidecar.
     */
    public function testAHungSentinelDelaysAConnectionAndNeverHangsTheSidecar(): void
    {
        [$sentinels] = $this->startSentinels();
        $sentinels[0]->signal(\SIGSTOP);
        try {
            $urls = \implode(',', \array_map(fn (RedisServer $sentinel) => $sentinel->url(), $sentinels));
            $hosts = $this->startHosts(3, self::GANESHA, $urls, ['--sentinel', self::MASTER, '--command-timeout-ms', '200']);
            $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, self::service('hung'));
            foreach ($hosts as $host) {
                self::assertSame(1, $host->sidecar->logLines("connected to 127.0.0.1:{$this->redis->port}"), "{$host->name} reached the master past the hung Sentinel");
                self::assertTrue($host->sidecar->running(), "{$host->name}'s sidecar runs");
            }
        } finally {
            $sentinels[0]->signal(\SIGCONT);
        }
        self::report("Sentinel: the first of three hung, every host open {$after} ms after the last failure");
    }

    /**
     * The same failover with everything over TLS and behind passwords, as a Sentinel set-up
     * reached across a network is run: the master, its replica and the Sentinels serve TLS only,
     * and speak it to each other (tls-replication); the Sentinels require a password of their
     * own (in each Sentinel's URL), the servers the default user's (replication's and the
     * Sentinels'), and the sidecars log in to the servers as docs/fleet.md's ACL user (--master-user,
     * --master-password), made on the replica too since ACL SETUSER is not replicated. Three
     * passwords, so that a sidecar that gave one where another belongs would be refused, and its
     * host decide alone; none of them is in a sidecar's log.
     */
    public function testTheHostsFollowTheFailoverOverTlsWithPasswordsForTheSentinelsAndTheMaster(): void
    {
        if (TlsFiles::openssl() === null) {
            self::markTestSkipped('openssl is not installed (apt-get install openssl)');
        }
        $tls = TlsFiles::make($this->dir);
        [$serversPassword, $sentinelsPassword] = [self::password(), self::password()];
        [$sentinels, $replica] = $this->startSentinels($tls->server(), $serversPassword, $sentinelsPassword);
        [$user, $password] = $this->createUser(self::ACL_RULE, $this->redis, $replica);
        $flags = ['--master-user', $user, '--master-password', $password, '--tls-ca-file', $tls->ca];

        $hosts = $this->assertTheHostsDecideAloneAndFollowTheFailover($sentinels, $replica, $flags, 'Sentinel over TLS, with passwords');
        // The sidecars' connections: not the Sentinels' (named sentinel-<id>-cmd or -pubsub), nor
        // one that has run no command yet (cmd=NULL), as a Sentinel's new link to the new master
        // is, unnamed, while its TLS handshake is under way.
        $clients = \array_filter(self::clients($replica), fn (string $client) => !\str_contains($client, ' name=sentinel-') && !\str_contains($client, ' cmd=NULL '));
        self::assertGreaterThanOrEqual(3, \count($clients), "a connection of each sidecar to the new master:\n" . \implode("\n", $clients));
        foreach ($clients as $client) {
            self::assertStringContainsString(" user={$user} ", $client, 'every sidecar is the ACL user on the new master, not the default one');
        }
        foreach ($hosts as $host) {
            $log = $host->sidecar->logText();
            self::assertStringContainsString("rediss://:***@127.0.0.1:{$sentinels[0]->port}", $log, "{$host->name}'s log names the Sentinels, their password hidden");
            foreach ([$serversPassword, $sentinelsPassword, $password] as $secret) {
                self::assertStringNotContainsString($secret, $log, "{$host->name}'s log shows no password");
            }
        }
    }

    /**
     * The master SIGKILLed under three hosts whose sidecars have $sidecarFlags, after the suite's
     * first scenario: each decides alone within two intervals (its sync state goes stale, by its
     * own clock, two intervals after its last sync, which was before the kill); the Sentinels
     * agree it is down (1 s without an answer, a quorum of 2) and promote the replica; within two
     * intervals of that, every host's sidecar has synced with it (the retries' backoff is at most
     * an interval), and within two more the fleet view is rebuilt, the failures the hosts counted
     * alone meanwhile included, which the new master never had. Requests are reported all along
     * and none waits. The times reported under $label; the hosts.
     *
     * @param list<RedisServer> $sentinels
     * @param list<string> $sidecarFlags
     * @return list<FleetHost>
     */
    private function assertTheHostsDecideAloneAndFollowTheFailover(array $sentinels, RedisServer $replica, array $sidecarFlags, string $label): array
    {
        $urls = \implode(',', \array_map(fn (RedisServer $sentinel) => $sentinel->url(), $sentinels));
        $hosts = $this->startHosts(3, self::GANESHA, $urls, ['--sentinel', self::MASTER, ...$sidecarFlags]);
        $service = self::service('sentinel');
        $opened = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, $service);
        self::assertSame("127.0.0.1\n{$this->redis->port}\n", $sentinels[0]->cli(['SENTINEL', 'get-master-addr-by-name', self::MASTER])['stdout']);

        $lastSync = [];
        foreach ($hosts as $host) {
            $lastSync[$host->name] = (int) $host->syncedAtMs();
        }
        $killed = $this->nowMs();
        $this->redis->kill();
        foreach ($hosts as $host) {
            $host->record($service, 1); // while no sidecar can publish it: the new master has it once they sync with it
        }
        $alone = [];
        $checked = $this->nowMs();
        $promoted = null;
        $back = [];
        $rebuilt = null;
        $deadline = \microtime(true) + 30.0;
        $watch = function () use ($hosts, $sentinels, $replica, $service, &$lastSync, &$alone, &$checked, &$promoted, &$back, &$rebuilt, $deadline): bool {
            if (\microtime(true) > $deadline) {
                self::fail('no fleet view after the failover: alone ' . \json_encode($alone) . ", promoted {$promoted}, back " . \json_encode($back) . "\n" . $this->logs());
            }
            foreach ($hosts as $host) {
                $synced = $host->syncedAtMs();
                if (!isset($alone[$host->name])) {
                    if ($synced === null) {
                        $alone[$host->name] = $this->nowMs();
                    } else {
                        $lastSync[$host->name] = $synced;
                    }
                } elseif ($promoted !== null && !isset($back[$host->name]) && $synced !== null && $synced >= $promoted) {
                    $back[$host->name] = $synced;
                }
            }
            if ($promoted === null) {
                // The promotion: at the last poll at which no Sentinel named the replica yet, so
                // that the polls' own time counts against the sidecars, never for them.
                $polled = $this->nowMs();
                foreach ($sentinels as $sentinel) {
                    if ($sentinel->cli(['SENTINEL', 'get-master-addr-by-name', self::MASTER])['stdout'] === "127.0.0.1\n{$replica->port}\n") {
                        $promoted = $checked;
                        break;
                    }
                }
                $checked = $polled;
            }
            if (\count($back) === \count($hosts) && $rebuilt === null) {
                $nine = \array_filter($hosts, fn ($host) => (self::fleetCounts($host, $service)['failures'] ?? null) === 9);
                $rebuilt = \count($nine) === \count($hosts) ? $this->nowMs() : null;
            }

            return $rebuilt === null;
        };
        $slowest = $this->trafficWhile($watch, $hosts, $service);

        foreach ($hosts as $host) {
            // Stale, by the segment's rule, two intervals after the last sync: before the kill.
            self::assertLessThanOrEqual($killed, $lastSync[$host->name], "{$host->name} synced last before the kill");
            self::assertLessThan($promoted, $alone[$host->name], "{$host->name} was seen deciding alone before the promotion");
        }
        $aloneAfter = \max($lastSync) + 2 * self::INTERVAL_MS - $killed;
        self::assertLessThanOrEqual(2 * self::INTERVAL_MS, $aloneAfter, 'every host decides alone within two intervals of the kill');
        $backAfter = \max($back) - $promoted;
        self::assertLessThanOrEqual(2 * self::INTERVAL_MS, $backAfter, "every host's sidecar synced with the new master within two intervals of the promotion:\n" . $this->logs());
        // At its first sync with the new master, each sidecar published all its counts again.
        self::assertLessThanOrEqual(2 * self::INTERVAL_MS, $rebuilt - \max($back), 'the fleet view rebuilt within two intervals of the last first sync');
        foreach ($hosts as $host) {
            self::assertFalse($host->available($service), "{$host->name} open again on the fleet's 9 failures");
            self::assertSame(9, self::fleetCounts($host, $service)['failures'] ?? null, $host->name);
            self::assertSame(1, $host->sidecar->logLines("connected to 127.0.0.1:{$replica->port}"), "{$host->name}'s sidecar says where the Sentinels sent it");
        }
        foreach ($sentinels as $sentinel) {
            $this->waitUntil(fn () => \str_contains($this->sentinelMaster($sentinel), "address=127.0.0.1:{$replica->port},"), "Sentinel {$sentinel->port} names the new master", 10.0);
        }
        self::assertSame("1\n", $replica->cli(['EXISTS', $this->shardKey($service)])['stdout'], 'the counts are on the new master');
        self::report(\sprintf(
            '%s: every host open %d ms after the last failure; master killed: every host alone %d ms after (seen after %d ms), the replica promoted %d ms after, '
            . 'every host synced with it %d ms after the promotion, the fleet view rebuilt %d ms after it; slowest report %.2f ms',
            $label,
            $opened,
            $aloneAfter,
            \max($alone) - $killed,
            $promoted - $killed,
            $backAfter,
            $rebuilt - $promoted,
            $slowest
        ));

        return $hosts;
    }

    /**
     * The test's master (with no delay before it streams its data to a replica, 5 s by
     * default), its replica, and three Sentinels watching the master with a quorum of 2, once
     * the replica has its data and every Sentinel knows the replica and the two other Sentinels
     * (from the master's INFO, and from their hello messages through it, every 2 s): what they
     * need to fail the master over. With $tls, all of them serve TLS only and speak it to each
     * other; with $serversPassword, the master and the replica require it, of the replica's
     * link and of the Sentinels too; with $sentinelsPassword, the Sentinels require it.
     *
     * @return array{0: list<RedisServer>, 1: RedisServer} the Sentinels and the replica
     */
    private function startSentinels(?RedisTls $tls = null, ?string $serversPassword = null, ?string $sentinelsPassword = null): array
    {
        $replication = $tls === null ? [] : ['--tls-replication', 'yes'];
        $this->redis = RedisServer::start($this->dir, tls: $tls, args: ['--repl-diskless-sync-delay', '0', ...$replication], password: $serversPassword);
        $replica = RedisServer::start($this->dir, tls: $tls, args: ['--replicaof', '127.0.0.1', (string) $this->redis->port, ...$replication], password: $serversPassword);
        $this->nodes[] = $replica;
        $this->waitUntil(fn () => \str_contains($replica->cli(['INFO', 'replication'])['stdout'], 'master_link_status:up'), 'the replica has the master\'s data');
        $sentinels = [];
        for ($i = 0; $i < 3; ++$i) {
            $sentinels[] = $this->nodes[] = RedisServer::sentinel($this->dir, self::MASTER, $this->redis, 2, tls: $tls, password: $sentinelsPassword);
        }
        foreach ($sentinels as $sentinel) {
            $this->waitUntil(fn () => \str_contains($this->sentinelMaster($sentinel), 'slaves=1,sentinels=3'), "Sentinel {$sentinel->port} knows the replica and the other Sentinels");
        }

        return [$sentinels, $replica];
    }

    /** What a Sentinel's INFO says of the master it watches (`master0:name=mymaster,status=ok,address=…,slaves=1,sentinels=3`). */
    private function sentinelMaster(RedisServer $sentinel): string
    {
        return $sentinel->cli(['INFO', 'sentinel'])['stdout'];
    }
}
