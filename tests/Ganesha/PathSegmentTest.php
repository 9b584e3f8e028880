<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use Ackintosh\Ganesha;
use Ackintosh\Ganesha\Builder;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * One circuit shared by PHP processes that are not parent and child, through the file named
 * by `ganesha_shm.path`: failures reported by two separate CLI commands trip it together, and a
 * third one, started afterwards, finds it open.
 */
final class PathSegmentTest extends GaneshaTestCase
{
    private string $path;

    protected function setUp(): void
    {
        parent::setUp();
        $this->path = \sys_get_temp_dir() . '/ganesha_shm_circuits.' . \getmypid() . '.' . \bin2hex(\random_bytes(4));
    }

    protected function tearDown(): void
    {
        @\unlink($this->path);
        parent::tearDown();
    }

    public function testSeparateCommandsTripAndSeeOneCircuit(): void
    {
        $service = self::service('path');

        $first = $this->command($service, 2);
        $second = $this->command($service, 2);
        $third = $this->command($service, 0);

        self::assertSame([true, []], [$first['available'], $first['events']], 'two failures are below minimumRequests');
        self::assertSame([false, [Ganesha::EVENT_TRIPPED]], [$second['available'], $second['events']], 'the other command\'s failures counted');
        self::assertFalse($third['available'], 'a command started later finds it open');
        self::assertSame(4, $third['failures']);
        self::assertSame(3, \count(\array_unique([$first['pid'], $second['pid'], $third['pid']])));
        self::assertSame($this->path, $third['segment']);
    }

    /**
     * Runs a new `php -n` process that reports $failures failures for $service, then asks
     * isAvailable(); returns what it saw.
     *
     * @return array{available: bool, events: list<string>, failures: int, pid: int, segment: string}
     */
    private function command(string $service, int $failures): array
    {
        $code = Php::autoloadCode(true) . \strtr(
            ' $adapter = new \\ADAPTER();
            $ganesha = \\BUILDER::withRateStrategy()->adapter($adapter)->timeWindow(60)->failureRateThreshold(50)
                ->minimumRequests(4)->intervalToHalfOpen(600)->build();
            $events = [];
            $ganesha->subscribe(function (string $event) use (&$events) { $events[] = $event; });
            for ($i = 0; $i < FAILURES; ++$i) { $ganesha->failure(SERVICE); }
            echo json_encode(["available" => $ganesha->isAvailable(SERVICE), "events" => $events,
                "failures" => $adapter->load("ganesha_" . SERVICE . "_failure"), "pid" => getmypid(),
                "segment" => ganesha_shm_info()["segment"]]);',
            [
                'ADAPTER' => SlidingTimeWindowShm::class,
                'BUILDER' => Builder::class,
                'FAILURES' => (string) $failures,
                'SERVICE' => \var_export($service, true),
            ]
        );

        return Php::json($code, ['ganesha_shm.path' => $this->path]);
    }
}
