<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Zts;

use Ackintosh\Ganesha;
use PHPUnit\Framework\Attributes\DataProvider;
use Zeusi\GaneshaShmAdapter\Tests\Apache\ApacheServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\ServerTestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Apache's event MPM with the thread-safe mod_php of tests/zts.sh: PHP starts in the parent,
 * which forks 2 children serving requests on 16 threads each. Every thread of every child
 * shares the parent's segment; a graceful restart (SIGUSR1) and a restart (SIGHUP) keep the
 * circuits, as under prefork; a full stop and start keeps them only in a segment file.
 *
 * @requires extension posix
 */
final class ApacheEventTest extends ServerTestCase
{
    private const CHILDREN = 2;

    private const THREADS = 16;

    public function testEveryRequestOfEveryThreadOfEveryChildIsCounted(): void
    {
        $server = $this->startEvent();
        $key = Unique::name('event_');

        $total = self::total($server->clients(8, self::native(), ['op' => 'increment', 'key' => $key], 500));
        self::assertSame([4000, 4000, []], [$total['sent'], $total['ok'], $total['errors']]);
        // every thread of both children held at once: both children read every increment
        $answers = $server->jsonAll(self::native(), \array_fill(0, self::CHILDREN * self::THREADS, ['op' => 'load', 'keys' => [$key]] + $server->barrier(self::CHILDREN * self::THREADS)));
        self::assertCount(self::CHILDREN, \array_unique(\array_column($answers, 'pid')), 'both children served');
        foreach ($answers as $answer) {
            self::assertSame([$key => 4000], $answer['counts'], "child {$answer['pid']}");
        }
    }

    public function testThirtyTwoThreadsAskingAtOnceLetOneTrialThrough(): void
    {
        self::requireGanesha();
        $server = $this->startEvent();
        $tripAt = \time();
        for ($round = 0; $round < 3; ++$round) {
            $circuit = ['service' => Unique::name('race.'), 'window' => 60, 'minimum' => 2, 'interval' => 5];
            $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            $tripped = $server->json(self::ganesha(), ['op' => 'failure', 'now' => $tripAt] + $circuit);
            self::assertSame([[Ganesha::EVENT_TRIPPED, $circuit['service'], '']], $tripped['events'], "round {$round}: tripped");

            $parties = self::CHILDREN * self::THREADS;
            $answers = $server->jsonAll(self::ganesha(), \array_fill(0, $parties, ['op' => 'available', 'now' => $tripAt + 6] + $circuit + $server->barrier($parties)));
            self::assertCount(self::CHILDREN, \array_unique(\array_column($answers, 'pid')), "round {$round}: both children asked");
            self::assertCount(1, \array_filter(\array_column($answers, 'available')), "round {$round}: one of {$parties} threads let through");
        }
    }

    /** @return array<string, array{bool}> */
    public static function segments(): array
    {
        return ['anonymous segment' => [false], 'segment file' => [true]];
    }

    /**
     * @dataProvider segments
     */
    #[DataProvider('segments')]
    public function testRestartsKeepTheCircuitsAsUnderPrefork(bool $file): void
    {
        $ini = $file ? ['ganesha_shm.path' => $this->tempDir() . '/segment'] : [];
        $key = Unique::name('restarts_');
        $read = ['op' => 'load', 'keys' => [$key]];

        $server = $this->startEvent($ini);
        $server->json(self::native(), ['op' => 'increment', 'key' => $key, 'times' => 7]);
        $server->graceful();
        self::assertSame([$key => 7], $server->json(self::native(), $read)['counts'], 'after a graceful restart');
        $server->restart();
        self::assertSame([$key => 7], $server->json(self::native(), $read)['counts'], 'after a restart');
        self::assertSame(1, $server->segmentMappings(), 'the parent maps one segment');
        $server->stop();

        $again = $this->startEvent($ini);
        self::assertSame([$key => $file ? 7 : 0], $again->json(self::native(), $read)['counts'], 'after a stop and a start');
    }

    protected static function webSuite(): string
    {
        return 'zts';
    }

    protected static function serverMissing(): ?string
    {
        return ZtsPhp::missing() ?? ApacheServer::missing();
    }

    protected static function native(): string
    {
        return ApacheServer::script('native');
    }

    protected static function ganesha(): string
    {
        return ApacheServer::script('ganesha');
    }

    /** @param array<string, scalar> $ini */
    private function startEvent(array $ini = []): ApacheServer
    {
        $threaded = ['module' => ZtsPhp::apacheModule(), 'extension' => ZtsPhp::extension(), 'threads' => self::THREADS];

        return $this->stopInTearDown(ApacheServer::start($ini, self::CHILDREN, self::CHILDREN * self::THREADS, [], $threaded));
    }
}
