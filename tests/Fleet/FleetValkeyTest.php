<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use PHPUnit\Framework\Attributes\Group;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;

/**
 * Fleet mode on Valkey, the Linux Foundation's fork of Redis that distributions and cloud
 * providers now ship in its place: the suite's first scenario and its exact counts, on Debian's
 * valkey-server (Debian 13's; Debian 12 has none, and tests/run.sh leaves out the group there,
 * saying so).
 *
 * @group valkey
 */
#[Group('valkey')]
final class FleetValkeyTest extends FleetTestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        $this->redis = RedisServer::start($this->dir, server: 'valkey-server');
        if ($this->redis === null) {
            self::markTestSkipped('valkey-server is not installed (apt-get install valkey-server, Debian 13)');
        }
        self::assertStringContainsString('valkey_version:', $this->redis->cli(['INFO', 'server'])['stdout'], 'the server is Valkey');
    }

    public function testFailuresSpreadOverTheFleetOpenEveryHostOnValkey(): void
    {
        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($this->startHosts(), self::service('valkey'));
        self::report("Valkey: every host open {$after} ms after the last failure");
    }

    public function testFleetCountsAreExactAndEveryHostKeepsItsOwnOnValkey(): void
    {
        $this->assertExactCounts($this->startHosts(3, self::COUNTING), false);
    }
}
