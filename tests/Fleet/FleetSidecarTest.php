<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

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

    public function testAFullSegmentRefusesTheFleetsCountsOfNewServicesWithOneLineEach(): void
    {
        // h1 has room for one service (3 counter slots); h2 reports failures of five.
        [$small, $large] = $this->startHosts(2, self::GANESHA, null, [], ['h1' => ['ganesha_shm.max_services' => 1]]);
        $own = self::service('own');
        $small->record($own, 1);
        $services = [];
        for ($i = 0; $i < 5; ++$i) {
            $large->record($services[] = self::service('many'), 1);
        }
        $this->waitForSyncs([$small, $large], $this->nowMs(), 4);

        $log = $small->sidecar->logText();
        $refused = \substr_count($log, "the segment refused the fleet's counts of");
        self::assertGreaterThanOrEqual(2, $refused, "at most 2 of the 5 fit beside h1's own service:\n{$log}");
        foreach ($services as $service) {
            self::assertLessThanOrEqual(1, \substr_count($log, "counts of \"ganesha_{$service}_failure\""), "one line for {$service}, not one a sync");
        }
        self::assertSame(1, self::own($small, $own)['failures'], 'its own service keeps its slot');
        self::assertTrue($small->sidecar->running());
    }

    public function testASegmentFileTruncatedUnderTheSidecarKillsNeitherItNorPhp(): void
    {
        [$host] = $this->startHosts(1);
        $service = self::service('cut');
        $host->record($service, 2);
        $this->waitForSyncs([$host], $this->nowMs(), 1);

        $cut = \fopen($host->segment, 'r+');
        self::assertNotFalse($cut);
        \ftruncate($cut, 4096);
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

    public function testFieldsItCannotParseAreLoggedOnceAndSkipped(): void
    {
        [$first, $second] = $this->startHosts(2);
        $service = self::service('hostile');
        $first->record($service, 3);
        $hash = "ganesha-shm:{{$this->fleet}:ganesha_{$service}}";
        $fields = [
            "intruder ganesha_{$service}_failure" => '1 122 99999999999 0:1:5 500:1:1',
            "other ganesha_{$service}_failure" => 'garbage',
            'nospace' => '1 122 99999999999',
            "small ganesha_{$service}_failure" => '1 12 99999999999 0:1:100',
        ];
        foreach ($fields as $field => $value) {
            $this->redis->cli(['HSET', $hash, $field, $value]);
        }
        $second->record($service, 3);
        $this->waitForSyncs([$first, $second], $this->nowMs(), 3);
        $log = $first->sidecar->logText();
        foreach (\array_keys($fields) as $field) {
            self::assertSame(1, \substr_count($log, 'skipped the field "' . $field . '"'), "{$field}, once:\n{$log}");
        }
        self::assertStringContainsString('ganesha_shm.max_buckets differs', $log);
        self::assertSame(6, self::fleetCounts($first, $service)['failures'], 'the hosts\' counts, nothing of the bad fields');
        self::assertTrue($first->sidecar->running());
    }
}
