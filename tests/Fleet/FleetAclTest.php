<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;

/**
 * Fleet mode as an ACL user (redis://USER:PASSWORD@…) with the rights docs/fleet.md gives one fleet and
 * no more, as managed and self-run Redis alike give each application: the suite's first
 * scenario runs with it, and a user short of one right is refused in a line naming the right.
 */
final class FleetAclTest extends FleetTestCase
{
    public function testFailuresSpreadOverTheFleetOpenEveryHostAsTheAclUserOfReadme(): void
    {
        $this->redis = RedisServer::start($this->dir);
        [$user, $password] = $this->createUser(self::ACL_RULE, $this->redis);
        $url = "redis://{$user}:{$password}@127.0.0.1:{$this->redis->port}";
        $hosts = $this->startHosts(3, self::GANESHA, $url);

        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, self::service('acl'));
        $clients = self::clients($this->redis);
        self::assertGreaterThanOrEqual(3, \count($clients), 'a connection of each sidecar');
        foreach ($clients as $client) {
            self::assertStringContainsString(" user={$user} ", $client, 'every sidecar is the ACL user, not the default one');
        }
        foreach ($hosts as $host) {
            self::assertStringNotContainsString($password, $host->sidecar->logText(), "{$host->name}'s log shows no password");
        }
        self::report("ACL user: every host open {$after} ms after the last failure");
    }

    public function testAUserWithoutOneRightIsRefusedInALineNamingItAndTheHostsDecideAlone(): void
    {
        $this->redis = RedisServer::start($this->dir);
        $rule = \str_replace(' +hset ', ' ', self::ACL_RULE);
        self::assertNotSame(self::ACL_RULE, $rule);
        [$user, $password] = $this->createUser($rule, $this->redis);

        $lines = $this->assertRefusedHostsDecideAlone("redis://{$user}:{$password}@127.0.0.1:{$this->redis->port}", [], true);
        foreach ($lines as $name => $line) {
            self::assertStringContainsString("refused by redis://{$user}:***@127.0.0.1:{$this->redis->port}", $line, $name);
            self::assertStringContainsString('fleet mode needs the right +hset, on the keys of its fleet such as ganesha-shm:4:{' . $this->fleet . ':', $line, "{$name}'s line names the missing right");
            self::assertStringNotContainsString($password, $line, $name);
        }
        self::report('ACL user without +hset: ' . \substr($lines['h1'], (int) \strpos($lines['h1'], 'refused by')));
    }
}
