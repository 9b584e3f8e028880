<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Clock;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

/**
 * A full store (ganesha_shm.max_services services of 3 counter keys and 1 status key) refuses
 * new keys and keeps serving the keys it holds. Run in a child process with max_services=2.
 */
final class StoreFullTest extends TestCase
{
    /** @var array<string, mixed> */
    private static array $result;

    public static function setUpBeforeClass(): void
    {
        $code = Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(60));
            $r = ["info0" => ganesha_shm_info()];
            $try = static function (callable $f) { try { $v = $f(); return ["ok", $v]; } catch (\\Throwable $e) { return [get_class($e), $e->getMessage()]; } };
            for ($i = 1; $i <= 6; ++$i) { for ($n = 0; $n < $i; ++$n) { $a->increment("ganesha_s" . $i . "_failure"); } }
            $a->saveLastFailureTime("ganesha_s6_failure", 66);
            $r["full"] = ganesha_shm_info();
            $r["increment_new"] = $try(fn () => $a->increment("ganesha_s7_failure"));
            $r["save_lft_new"] = $try(fn () => $a->saveLastFailureTime("ganesha_s8_failure", 1));
            $r["load_new"] = $try(fn () => $a->load("ganesha_s7_failure"));
            $r["increment_old"] = $try(fn () => $a->increment("ganesha_s1_failure"));
            $r["save_lft_old"] = $try(fn () => $a->saveLastFailureTime("ganesha_s2_failure", 22));
            $r["counts"] = array_map(fn ($i) => $a->load("ganesha_s" . $i . "_failure"), range(1, 6));
            $r["lfts"] = [$a->loadLastFailureTime("ganesha_s2_failure"), $a->loadLastFailureTime("ganesha_s6_failure")];
            $r["status1"] = $try(fn () => $a->saveStatus("ganesha_s1_status", 2));
            $r["status2"] = $try(fn () => $a->saveStatus("ganesha_s2_status", 2));
            $r["status_new"] = $try(fn () => $a->saveStatus("ganesha_s3_status", 2));
            $r["status_old"] = $try(fn () => $a->saveStatus("ganesha_s1_status", 5));
            $r["statuses"] = [$a->loadStatus("ganesha_s1_status"), $a->loadStatus("ganesha_s2_status"), $a->loadStatus("ganesha_s3_status")];
            $r["after"] = ganesha_shm_info();
            $a->reset();
            $r["after_reset_increment"] = $try(function () use ($a) { $a->increment("ganesha_s9_failure"); return $a->load("ganesha_s9_failure"); });
            $r["after_reset_status"] = $try(function () use ($a) { $a->saveStatus("ganesha_s9_status", 2); return $a->loadStatus("ganesha_s9_status"); });
            echo json_encode($r);',
            TestAdapter::class,
            FakeContext::class
        );
        self::$result = Php::json($code, ['ganesha_shm.max_services' => 2]);
    }

    public function testTheSlotsOfExpiredKeysAreReused(): void
    {
        // time window 1 s: a counter key written at t0 is kept (1 + 1) * 1 s, until t0 + 2
        $code = Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(1));
            $try = static function (callable $f) { try { return ["ok", $f()]; } catch (\\Throwable $e) { return [get_class($e), $e->getMessage()]; } };
            $t0 = \\%s::nextSecond();
            $a->increment("k1"); $a->increment("k2"); $a->saveLastFailureTime("k3", 5);
            $r = ["full" => $try(fn () => $a->increment("k4")), "second" => time() - $t0];
            \\%s::sleepUntil($t0 + 3);
            $r["info_expired"] = ganesha_shm_info();
            $r["new"] = $try(function () use ($a) { $a->increment("k4"); $a->increment("k5"); $a->saveLastFailureTime("k6", 6); return [$a->load("k4"), $a->load("k5"), $a->loadLastFailureTime("k6")]; });
            $r["old"] = [$a->load("k1"), $a->load("k2"), $a->loadLastFailureTime("k3")];
            $r["info"] = ganesha_shm_info();
            echo json_encode($r);',
            TestAdapter::class,
            FakeContext::class,
            Clock::class,
            Clock::class
        );

        $result = Php::json($code, ['ganesha_shm.max_services' => 1]);

        self::assertSame(0, $result['second'], 'the clock passed a second: the machine is too slow for this test');
        self::assertSame(\RuntimeException::class, $result['full'][0]);
        self::assertStringContainsString('ganesha_shm.max_services', $result['full'][1]);
        self::assertSame(0, $result['info_expired']['counter_slots_used'], 'expired keys are not in use');
        self::assertSame(['ok', [1, 1, 6]], $result['new'], 'new keys take the slots of expired ones');
        self::assertSame([0, 0, null], $result['old']);
        self::assertSame(3, $result['info']['counter_slots_used']);
        self::assertSame(3, $result['info']['reclaims']);
    }

    public function testTheStoreHoldsMaxServicesServices(): void
    {
        $info = self::$result['info0'];
        self::assertSame(2, $info['max_services']);
        self::assertGreaterThanOrEqual(6, $info['counter_slots']);
        self::assertGreaterThanOrEqual(2, $info['status_slots']);
        self::assertSame(0, $info['counter_slots_used']);
        self::assertSame(0, $info['status_slots_used']);

        self::assertSame(6, self::$result['full']['counter_slots_used']);
        self::assertSame(0, self::$result['full']['full_errors']);
    }

    public function testANewCounterKeyIsRefused(): void
    {
        foreach (['increment_new', 'save_lft_new'] as $case) {
            self::assertSame(\RuntimeException::class, self::$result[$case][0], "{$case}: exception class without Ganesha");
            self::assertStringContainsString('ganesha_shm.max_services', self::$result[$case][1], $case);
        }
    }

    public function testLoadingAnAbsentKeyStillWorks(): void
    {
        self::assertSame(['ok', 0], self::$result['load_new']);
    }

    public function testExistingCounterKeysKeepWorkingAndKeepTheirCounts(): void
    {
        self::assertSame(['ok', null], self::$result['increment_old']);
        self::assertSame(['ok', null], self::$result['save_lft_old']);
        self::assertSame([2, 2, 3, 4, 5, 6], self::$result['counts']);
        self::assertSame([22, 66], self::$result['lfts']);
    }

    public function testANewStatusKeyIsRefused(): void
    {
        self::assertSame(['ok', null], self::$result['status1']);
        self::assertSame(['ok', null], self::$result['status2']);
        self::assertSame(\RuntimeException::class, self::$result['status_new'][0]);
        self::assertStringContainsString('ganesha_shm.max_services', self::$result['status_new'][1]);
        self::assertSame(['ok', null], self::$result['status_old']);
        self::assertSame([5, 2, 1], self::$result['statuses']);
    }

    public function testTheFiguresCountTheRefusals(): void
    {
        $after = self::$result['after'];
        self::assertSame(6, $after['counter_slots_used']);
        self::assertSame(2, $after['status_slots_used']);
        self::assertGreaterThanOrEqual(3, $after['full_errors']);
    }

    public function testResetMakesRoom(): void
    {
        self::assertSame(['ok', 1], self::$result['after_reset_increment']);
        self::assertSame(['ok', 2], self::$result['after_reset_status']);
    }
}
