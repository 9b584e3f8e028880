<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Ackintosh\Ganesha;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\FleetSidecar;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;

/**
 * The sidecar as an operator meets it: its configuration errors, a segment it cannot use, and
 * what it does with data in Redis it cannot parse (written by anyone who can write Redis).
 */
final class FleetSidecarTest extends FleetTestCase
{
    public function testABadConfigurationIsOneLineAndExitStatus2(): void
    {
        $binary = FleetSidecar::binary();
        foreach ([
            [[], 'configuration error: segment is required (--segment)'],
            [['--segment', '/x', '--redis', 'redis://127.0.0.1:1', '--fleet', 'a b'], 'fleet = "a b" is not 1 to 64 of'],
            [['--segment', '/x', '--redis', 'redis://127.0.0.1:1', '--fleet', 'shop', '--interval-ms', '0'], 'interval_ms = "0" is not a whole number of milliseconds from 100 to 60000'],
            [['--config', $this->dir . '/none.conf'], 'cannot read ' . $this->dir . '/none.conf'],
        ] as [$args, $message]) {
            $run = Command::run([$binary, ...$args], timeout: 10.0);
            self::assertSame(2, $run['exit'], \implode(' ', $args));
            self::assertSame(1, \substr_count($run['stderr'], "\n"), $run['stderr']);
            self::assertStringContainsString($message, $run['stderr']);
        }
        $help = Command::run([$binary, '--help'], timeout: 10.0);
        self::assertSame(0, $help['exit']);
        self::assertStringContainsString('--interval-ms N', $help['stdout']);
    }

    public function testAConfigFileRunsIt(): void
    {
        $this->redis = RedisServer::start($this->dir);
        [$host] = $this->startHosts(1);
        $config = $this->dir . '/fleet.conf';
        \file_put_contents($config, "# as the package's /etc/ganesha-shm/fleet.conf\nsegment = {$host->segment}\nredis = {$this->redis->url()}\n"
            . "fleet = {$this->fleet}\nhost = filed\ninterval-ms = 200\n");
        $host->sidecar->stop();
        $host->sidecar = FleetSidecar::start(['--config', $config], $this->dir . '/filed.log');
        $this->waitForSyncs([$host], $this->nowMs(), 1);
        self::assertStringContainsString('host filed, segment ' . $host->segment, $host->sidecar->logText());
        self::assertSame(200, $host->snapshot()['info']['fleet_sync_interval_ms']);
    }

    public function testASegmentWithoutFleetModeIsRefusedWithExitStatus1(): void
    {
        $segment = $this->dir . '/local.segment';
        Php::json('echo json_encode([ganesha_shm_info()["segment"]]);', ['ganesha_shm.path' => $segment]);
        $run = Command::run([FleetSidecar::binary(), '--segment', $segment, '--redis', 'redis://127.0.0.1:1', '--fleet', 'shop', '--host', 'a'], timeout: 10.0);
        self::assertSame(1, $run['exit'], $run['stderr']);
        self::assertStringContainsString('was made without fleet mode: start PHP with ganesha_shm.fleet=1', $run['stderr']);
    }

    public function testItWaitsForASegmentFileThatIsNotThereYet(): void
    {
        $this->redis = RedisServer::start($this->dir);
        $segment = $this->dir . '/later.segment';
        $sidecar = FleetSidecar::start(['--segment', $segment, '--redis', $this->redis->url(), '--fleet', $this->fleet, '--host', 'a', '--interval-ms', '100'], $this->dir . '/later.log');
        $this->waitUntil(fn () => \str_contains($sidecar->logText(), 'waiting for ' . $segment), 'it says it waits');
        Php::json('echo json_encode([1]);', ['ganesha_shm.path' => $segment, 'ganesha_shm.fleet' => 1]);
        $this->waitUntil(fn () => \str_contains($sidecar->logText(), 'attached to ' . $segment), 'it attaches');
        self::assertSame(1, \substr_count($sidecar->logText(), 'waiting for'), 'one line for the whole wait');
        self::assertSame(0, $sidecar->stop());
    }

    public function testAFullSegmentKeepsItsSlotsForItsOwnServicesAndTakesNoneForTheFleets(): void
    {
        // h1 has room for two services (6 counter slots); h2 reports failures of five, and of h1's.
        [$small, $large] = $this->startHosts(2, self::GANESHA, null, [], ['h1' => ['ganesha_shm.max_services' => 2]]);
        $own = self::service('own');
        $small->record($own, 1);
        $large->record($own, 2);
        $services = [];
        for ($i = 0; $i < 5; ++$i) {
            $large->record($services[] = self::service('many'), 1);
        }
        $this->waitForSyncs([$small, $large], $this->nowMs(), 4);

        self::assertSame([], self::heldOf($small, $services), "h1 holds a slot for none of the services only h2 counts:\n" . $this->logs());
        self::assertSame(3, self::fleetCounts($small, $own)['failures'] ?? null, "the fleet's counts of its own service");
        $later = self::service('later');
        $small->record($later, 1);
        self::assertSame(1, self::own($small, $later)['failures'] ?? null, 'its second own service finds its slot free');
        self::assertSame([], \array_filter($small->events(), fn (array $event) => $event[0] === Ganesha::EVENT_STORAGE_ERROR), 'Ganesha never failed open');
        self::assertTrue($small->sidecar->running());
    }

    public function testASegmentFileTruncatedUnderTheSidecarKillsNeitherItNorPhp(): void
    {
        [$host] = $this->startHosts(1);
        $service = self::service('cut');
        $host->record($service, 2);
        $this->waitForSyncs([$host], $this->nowMs(), 1);

        // To nothing: the header the sidecar reads at every sync goes too, so that it faults
        // whichever slots the service's keys took. (Cut to a page, the keys of a service whose
        // slots lie in the first page, as they may, were read on without a fault.)
        $cut = \fopen($host->segment, 'r+');
        self::assertNotFalse($cut);
        self::assertTrue(\ftruncate($cut, 0));
        \fclose($cut);
        $this->waitUntil(
            fn () => \str_contains($host->sidecar->logText(), 'was truncated under its mapping: attaching again'),
            'the sidecar notices the truncation'
        );
        $this->waitUntil(fn () => \str_contains($host->sidecar->logText(), 'cannot attach to ' . $host->segment), 'it refuses the cut file');
        \usleep(3 * self::INTERVAL_MS * 1000);
        self::assertTrue($host->sidecar->running(), "the sidecar lives on:\n" . $host->sidecar->logText());
        self::assertSame(1, \substr_count($host->sidecar->logText(), 'cannot attach to'), 'one line while the file stays cut');
        $host->record($service, 1);
        self::assertSame(0, $host->snapshot()['info']['fleet_attached'], 'PHP lives on too, and decides alone');
    }

    public function testRowsItCannotParseAreSkippedWithARateLimitedLogLine(): void
    {
        [$first, $second] = $this->startHosts(2);
        $service = self::service('hostile');
        $first->record($service, 3);
        $this->waitForSyncs([$first, $second], $this->nowMs());
        self::assertGreaterThan(0, $this->spoilSums($service), "the service's sums: " . \implode(', ', $this->keys()));
        $second->record($service, 3);
        $this->waitForSyncs([$first, $second], $this->nowMs(), 4);

        foreach ([$first, $second] as $host) {
            self::assertSame(6, self::fleetCounts($host, $service)['failures'] ?? null, "{$host->name}: the hosts' counts, nothing of the bad rows:\n" . $this->logs());
            self::assertTrue($host->sidecar->running());
        }
        $this->waitUntil(fn () => $first->sidecar->logLines('skipped') + $second->sidecar->logLines('skipped') >= 1, 'a sidecar logs what it skipped');
        foreach ([$first, $second] as $host) {
            // At most 10 lines a minute, then one saying the rest were suppressed.
            self::assertLessThanOrEqual(11, $host->sidecar->logLines('skipped') + $host->sidecar->logLines('suppressed'), $host->sidecar->logText());
        }
    }
}
