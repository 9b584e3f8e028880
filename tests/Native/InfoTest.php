<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * ganesha_shm_info() and `php --ri ganesha_shm`.
 */
final class InfoTest extends TestCase
{
    private const INT_KEYS = [
        'segment_bytes', 'layout_version', 'max_services', 'max_key_length', 'counter_slots',
        'counter_headroom_slots', 'counter_slot_bytes', 'status_slots', 'status_headroom_slots',
        'status_slot_bytes', 'bytes_per_service',
        'counter_slots_used', 'status_slots_used', 'claims', 'reclaims', 'full_errors',
    ];

    public function testTheFiguresAreAllThere(): void
    {
        $info = \ganesha_shm_info();

        foreach (\array_merge(['version', 'segment'], self::INT_KEYS) as $key) {
            self::assertArrayHasKey($key, $info);
        }
        foreach ($info as $key => $value) {
            if ($key !== 'version' && $key !== 'segment') {
                self::assertIsInt($value, $key);
            }
        }
        self::assertIsString($info['version']);
        self::assertSame(\phpversion('ganesha_shm'), $info['version']);
        self::assertSame('anonymous', $info['segment']);
        foreach (self::INT_KEYS as $key) {
            self::assertIsInt($info[$key], $key);
            self::assertGreaterThanOrEqual(0, $info[$key], $key);
        }
    }

    public function testTheFiguresAreConsistent(): void
    {
        $info = \ganesha_shm_info();

        self::assertSame((int) \ini_get('ganesha_shm.max_services'), $info['max_services']);
        self::assertSame((int) \ini_get('ganesha_shm.max_key_length'), $info['max_key_length']);
        self::assertGreaterThanOrEqual(1, $info['layout_version']);
        self::assertGreaterThan(0, $info['counter_slot_bytes']);
        self::assertGreaterThan(0, $info['status_slot_bytes']);
        self::assertSame(self::bytesPerService($info), $info['bytes_per_service']);
        self::assertSame(3 * $info['max_services'], $info['counter_slots']);
        self::assertSame($info['max_services'], $info['status_slots']);
        self::assertSame(\intdiv($info['counter_slots'] + 1, 2), $info['counter_headroom_slots'], 'half the capacity again');
        self::assertSame(\intdiv($info['status_slots'] + 1, 2), $info['status_headroom_slots']);
        self::assertGreaterThanOrEqual($info['max_services'] * $info['bytes_per_service'], $info['segment_bytes']);
        self::assertLessThanOrEqual($info['counter_slots'], $info['counter_slots_used']);
        self::assertLessThanOrEqual($info['status_slots'], $info['status_slots_used']);
    }

    public function testTheDefaultSettings(): void
    {
        self::assertSame('1024', \ini_get('ganesha_shm.max_services'), 'run the suite without -d ganesha_shm.max_services');
        self::assertSame(1024, \ganesha_shm_info()['max_services']);
    }

    public function testSlotsUsedGrowByOnePerNewKey(): void
    {
        $adapter = TestAdapter::forWindow(60);
        $key = Unique::name('info_');
        $info = \ganesha_shm_info();
        $figures = static fn (): array => \array_intersect_key(
            \ganesha_shm_info(),
            ['counter_slots_used' => 0, 'status_slots_used' => 0, 'full_errors' => 0]
        );
        $expected = $figures();

        $adapter->load($key);
        $adapter->loadLastFailureTime($key);
        $adapter->loadStatus($key);
        self::assertSame($expected, $figures(), 'loading absent keys stores nothing');

        $adapter->increment($key);
        ++$expected['counter_slots_used'];
        self::assertSame($expected, $figures(), 'a new counter key');

        $adapter->increment($key);
        $adapter->saveLastFailureTime($key, 1);
        self::assertSame($expected, $figures(), 'the same counter key again, for a count and a last failure time');

        $adapter->saveLastFailureTime($key . '_lft', 1);
        ++$expected['counter_slots_used'];
        self::assertSame($expected, $figures(), 'a new key for a last failure time takes a counter slot');

        $adapter->saveStatus($key, 2);
        ++$expected['status_slots_used'];
        self::assertSame($expected, $figures(), 'a new status key, with the name of a counter key');

        $adapter->saveStatus($key, 1);
        self::assertSame($expected, $figures(), 'the same status key again');

        $claims = \ganesha_shm_info()['claims'];
        self::assertGreaterThan($info['claims'], $claims, 'new keys were claimed');
        $adapter->increment($key . '_more');
        self::assertGreaterThan($claims, \ganesha_shm_info()['claims']);

        self::assertSame(\phpversion('ganesha_shm'), \ganesha_shm_info()['version']);
    }

    public function testPhpRiShowsTheSettings(): void
    {
        $result = Php::run('', ['extension' => Php::extensionPath(), 'ganesha_shm.max_services' => 7, 'ganesha_shm.max_key_length' => 99], ['--ri', 'ganesha_shm']);

        self::assertSame(0, $result['exit'], $result['stderr']);
        $out = $result['stdout'];
        self::assertStringContainsString('ganesha_shm', $out);
        self::assertStringContainsString((string) \phpversion('ganesha_shm'), $out);
        self::assertMatchesRegularExpression('/^.*ganesha_shm\.max_services\b.*(?<!\d)7(?!\d).*$/m', $out);
        self::assertMatchesRegularExpression('/^.*ganesha_shm\.max_key_length\b.*(?<!\d)99(?!\d).*$/m', $out);
        self::assertMatchesRegularExpression('/segment/i', $out);
    }

    public function testInfoInAChildWithOtherSettings(): void
    {
        $info = Php::json('echo json_encode(ganesha_shm_info());', ['ganesha_shm.max_services' => 3, 'ganesha_shm.max_key_length' => 64]);

        self::assertSame(3, $info['max_services']);
        self::assertSame(64, $info['max_key_length']);
        self::assertSame(self::bytesPerService($info), $info['bytes_per_service']);
        self::assertSame([9, 5, 3, 2], [$info['counter_slots'], $info['counter_headroom_slots'], $info['status_slots'], $info['status_headroom_slots']]);
        self::assertSame(0, $info['counter_slots_used']);
        self::assertSame(0, $info['status_slots_used']);
        self::assertSame(0, $info['claims']);
        self::assertLessThan(\ganesha_shm_info()['segment_bytes'], $info['segment_bytes'], 'a store of 3 services is smaller than one of 1024');
    }

    public function testFleetModeNeedsASegmentFileAndShowsTheSidecarsState(): void
    {
        self::assertArrayNotHasKey('fleet_attached', \ganesha_shm_info(), 'no fleet figures without fleet mode');

        $alone = Php::withExtension('echo json_encode(array_key_exists("fleet_attached", ganesha_shm_info()));', ['ganesha_shm.fleet' => 1]);
        self::assertSame('false', $alone['stdout'], 'without ganesha_shm.path, fleet mode is off');
        self::assertStringContainsString('ganesha_shm.fleet=1 needs ganesha_shm.path (the fleet sidecar attaches to that file); fleet mode is off', $alone['stderr']);
        $bad = Php::withExtension('echo json_encode(array_key_exists("fleet_attached", ganesha_shm_info()));', ['ganesha_shm.fleet' => 'maybe']);
        self::assertSame('false', $bad['stdout']);
        self::assertStringContainsString('ganesha_shm.fleet="maybe" is not 0 or 1; fleet mode is off', $bad['stderr']);

        $path = \sys_get_temp_dir() . '/' . Unique::name('fleet_info.');
        try {
            $fleet = Php::json('echo json_encode(ganesha_shm_info());', ['ganesha_shm.path' => $path, 'ganesha_shm.fleet' => 'on']);
            $local = Php::json('echo json_encode(ganesha_shm_info());', ['ganesha_shm.max_services' => 1024]);
        } finally {
            @\unlink($path);
        }
        self::assertSame([0, 0, 0, 0], [$fleet['fleet_attached'], $fleet['fleet_sync_interval_ms'], $fleet['fleet_hosts'], $fleet['fleet_sync_errors']], 'no sidecar has synced');
        self::assertArrayNotHasKey('fleet_sync_age_ms', $fleet, 'no sync yet');
        // Every counter slot holds a second ring, of max_buckets + 2 words, and its window.
        self::assertSame($local['counter_slot_bytes'] + 122 * 8 + 8, $fleet['counter_slot_bytes'], 'a second ring, and the word of its window');
    }

    /** The shared memory of every slot, with the headroom, shared out over the services. */
    private static function bytesPerService(array $info): int
    {
        return \intdiv(
            ($info['counter_slots'] + $info['counter_headroom_slots']) * $info['counter_slot_bytes']
                + ($info['status_slots'] + $info['status_headroom_slots']) * $info['status_slot_bytes'],
            $info['max_services']
        );
    }
}
