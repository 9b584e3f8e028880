<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use PHPUnit\Framework\Attributes\DataProvider;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Graceful restarts of Apache (SIGUSR1 to the parent, what `apachectl graceful` and
 * `systemctl reload apache2` send). The parent keeps its pid and its listening socket, tells
 * its children to finish the request they serve and exit, and runs PHP's module shutdown and
 * startup again in the same process (mod_php's cleanup of the configuration pool, then its
 * post_config hook), unloading the extension's shared object and loading it again: so the
 * extension's MSHUTDOWN and MINIT run again in one process, with its statics new, as often as
 * the server is reloaded (daily, by logrotate's postrotate, on many Debian servers). Then it
 * forks a new generation of children as the old ones exit; each child, old or new, also runs
 * PHP's module shutdown when it exits normally (mod_php's cleanup of the child's pool).
 *
 * Under load, 20 gracefuls in a row fail no request, and leave the parent with as many
 * mappings of the segment, and as much shared memory, as it had after the first: a parent that
 * mapped a new segment at each MINIT without unmapping the old one at MSHUTDOWN would grow by a
 * mapping (and by the memory of its segment) every reload.
 *
 * And what a graceful does to the circuits: with ganesha_shm.path the new generation maps the
 * same file and finds them as they were; with an anonymous segment, the parent's new MINIT
 * finds the segment its earlier image left in the process and adopts it, so the new generation
 * finds them as they were too, unless the settings that shape the segment changed (then it
 * gets a new, empty one, and the old one is unmapped). Either way, an old child still serving
 * a request finishes it on the segment it was forked with.
 */
final class GracefulTest extends ApacheTestCase
{
    private const GRACEFULS = 20;

    /** How much the parent's RssShmem may move between the first graceful and the last. */
    private const RSS_SHMEM_TOLERANCE_KB = 1024;

    private const CLIENTS = 3;

    private const CHILDREN = 4;

    /** Seconds to wait for a request to reach its child, or for an old child to exit. */
    private const WAIT_S = 10.0;

    /** @return array<string, array{bool}> */
    public static function segments(): array
    {
        return ['anonymous segment' => [false], 'segment file' => [true]];
    }

    /**
     * 3 load clients incrementing one key, one request after the other, during 20 gracefuls,
     * each waited for (the error log says the parent resumed normal operations, no child of the
     * old generation is left, and a new child serves). The figures of the parent (its mappings
     * of the segment, its RssShmem, and the blocks its mapped segments hold: what stale mappings
     * would keep alive, the children's pages included, which RssShmem does not count), at start,
     * after the first graceful and after the 20th, are printed whatever the outcome.
     *
     * @dataProvider segments
     */
    #[DataProvider('segments')]
    public function testTwentyGracefulsUnderLoadFailNoRequestAndLeakNoMapping(bool $file): void
    {
        $ini = $file ? ['ganesha_shm.path' => $this->tempDir() . '/segment'] : [];
        $server = $this->startApache($ini, self::CHILDREN);
        $parent = $server->parentPid();
        $key = Unique::name('graceful_');
        $started = self::figures($server);

        $load = $server->load(self::CLIENTS, self::native(), ['op' => 'increment', 'key' => $key], 50_000, 60.0);
        try {
            $seconds = [$server->graceful()];
            $first = self::figures($server);
            for ($i = 1; $i < self::GRACEFULS; ++$i) {
                $seconds[] = $server->graceful();
            }
            $last = self::figures($server);
        } finally {
            $load->stop();
        }
        $total = self::total($load->finish());

        $segment = $file ? 'segment file' : 'anonymous segment';
        self::report(\sprintf(
            '%s, %d gracefuls under load (%.2f s each at most, %.1f s in all), parent %d: segment mappings %d at start, %d after the 1st graceful, %d after the %dth; RssShmem %d kB, %d kB, %d kB; blocks held by the mapped segments %s kB, %s kB, %s kB',
            $segment,
            self::GRACEFULS,
            \max($seconds),
            \array_sum($seconds),
            $parent,
            $started['mappings'],
            $first['mappings'],
            $last['mappings'],
            self::GRACEFULS,
            $started['rss'],
            $first['rss'],
            $last['rss'],
            $started['blocks'] ?? 'n/a',
            $first['blocks'] ?? 'n/a',
            $last['blocks'] ?? 'n/a',
        ));
        self::report(\sprintf('%s: load of %d clients: %d requests, %d failed, served by %d children', $segment, self::CLIENTS, $total['sent'], $total['failed'], \count($total['pids'])));

        self::assertSame([], $total['errors'], 'no request failed');
        self::assertSame([$total['sent'], 0], [$total['ok'], $total['failed']]);
        self::assertGreaterThanOrEqual(self::GRACEFULS, $total['ok'], 'the load ran during the gracefuls');
        self::assertTrue(ProcFs::alive($parent), 'the same parent');
        if ($file) {
            self::assertSame([$key => $total['ok']], $server->json(self::native(), ['op' => 'load', 'keys' => [$key]])['counts'], 'every increment, by every generation, is in the file');
        }
        self::assertEqualsWithDelta(
            $first['rss'],
            $last['rss'],
            self::RSS_SHMEM_TOLERANCE_KB,
            \sprintf('the parent\'s RssShmem: %d kB after the 1st graceful, %d kB after the %dth', $first['rss'], $last['rss'], self::GRACEFULS)
        );
        self::assertSame(
            $first['mappings'],
            $last['mappings'],
            \sprintf(
                'the parent\'s mappings of the %s: %d after the 1st graceful, %d after the %dth (%d at start): a graceful leaves as many as it found',
                $segment,
                $first['mappings'],
                $last['mappings'],
                self::GRACEFULS,
                $started['mappings']
            )
        );
    }

    public function testAGracefulRestartWithAnAnonymousSegment(): void
    {
        $server = $this->startApache([], self::CHILDREN);
        self::assertSame('anonymous', $server->json(self::native(), ['op' => 'info'])['info']['segment']);

        $this->circuitsAcrossAGraceful($server, true);
    }

    public function testAGracefulRestartWithOtherSettingsGivesANewAnonymousSegment(): void
    {
        $server = $this->startApache([], self::CHILDREN);
        $server->changeIni(['ganesha_shm.max_services' => 64]);
        $this->circuitsAcrossAGraceful($server, false);
        self::assertSame(64, $server->json(self::native(), ['op' => 'info'])['info']['max_services'], 'the new settings hold');
    }

    public function testAGracefulRestartKeepsTheCircuitsOfASegmentFile(): void
    {
        $path = $this->tempDir() . '/segment';
        $server = $this->startApache(['ganesha_shm.path' => $path], self::CHILDREN);
        self::assertSame($path, $server->json(self::native(), ['op' => 'info'])['info']['segment'], 'Apache maps the file of ganesha_shm.path');

        $this->circuitsAcrossAGraceful($server, true);
    }

    /**
     * Counts and a status recorded by every child; a request of the old generation held at a
     * barrier across a graceful; then: the new generation reads the circuits as they were
     * ($kept) or empty, and increments; the held request, let go, is answered by its old child,
     * from the segment that child was forked with: the new generation's increments in it when
     * the segment is one, not when the new generation has a segment of its own. The old child
     * then exits.
     */
    private function circuitsAcrossAGraceful(ApacheServer $server, bool $kept): void
    {
        $key = Unique::name('graceful_');
        $status = Unique::name('graceful_status_');
        $read = ['op' => 'load', 'keys' => [$key], 'statuses' => [$status]];
        self::everyChild($server, self::native(), ['op' => 'increment', 'key' => $key, 'times' => 10], self::CHILDREN);
        $server->json(self::native(), ['op' => 'save_status', 'key' => $status, 'status' => 2]);
        foreach (self::everyChild($server, self::native(), $read, self::CHILDREN) as $pid => $answer) {
            self::assertSame([[$key => 40], [$status => 2]], [$answer['counts'], $answer['statuses']], "child {$pid} before the graceful");
        }
        $old = $server->childPids();
        $mappings = $server->segmentMappings();
        $rss = $server->rssShmemKb();

        $barrier = $server->barrier(2);
        $held = $server->send(self::native(), $read + $barrier);
        $holder = $this->arrival($server, $barrier);
        self::assertContains($holder, $old);

        $server->graceful(false);

        self::assertTrue(ProcFs::alive($holder), 'the old child serving a request is still there');
        $expected = $kept ? [[$key => 40], [$status => 2]] : [[$key => 0], [$status => 1]];
        $after = self::everyChild($server, self::native(), $read, self::CHILDREN);
        self::assertSame([], \array_intersect(\array_keys($after), $old), 'a new generation of children serves');
        foreach ($after as $pid => $answer) {
            self::assertSame($expected, [$answer['counts'], $answer['statuses']], "new child {$pid} after the graceful: the circuits " . ($kept ? 'kept' : 'forgotten'));
        }
        self::everyChild($server, self::native(), ['op' => 'increment', 'key' => $key], self::CHILDREN);

        // the second party of the barrier: the held request goes on, in its old child
        \touch($barrier['barrier'] . '/release');
        $answer = $server->collectJson($held);
        self::assertSame($holder, $answer['pid']);
        self::assertSame(
            [[$key => $kept ? 44 : 40], [$status => 2]],
            [$answer['counts'], $answer['statuses']],
            'the old child finished its request on the segment it was forked with' . ($kept ? ', which the new children count into' : ', which the new children do not see')
        );
        $deadline = \microtime(true) + self::WAIT_S;
        while (ProcFs::alive($holder)) {
            if (\microtime(true) > $deadline) {
                self::fail("the old child {$holder} did not exit after its request\n" . $server->errorLog());
            }
            \usleep(10_000);
        }
        self::report(\sprintf(
            'a graceful with %s: circuits %s; parent segment mappings %d before, %d after; RssShmem %d kB before, %d kB after',
            $server->ini['ganesha_shm.path'] ?? 'an anonymous segment',
            $kept ? 'kept' : 'forgotten',
            $mappings,
            $server->segmentMappings(),
            $rss,
            $server->rssShmemKb()
        ));
    }

    /**
     * Waits until a request reached the barrier; returns the pid of its child.
     *
     * @param array{barrier: string, parties: int} $barrier
     */
    private function arrival(ApacheServer $server, array $barrier): int
    {
        $deadline = \microtime(true) + self::WAIT_S;
        while (($arrived = ApacheServer::arrivals($barrier)) === []) {
            if (\microtime(true) > $deadline) {
                self::fail("the request did not reach a child in 10 s\n" . $server->errorLog());
            }
            \usleep(5_000);
        }

        return $arrived[0];
    }

    /**
     * The parent's segment mappings, RssShmem (kB) and the blocks its mapped segments hold (kB;
     * null when they cannot be read).
     *
     * @return array{mappings: int, rss: int, blocks: int|null}
     */
    private static function figures(ApacheServer $server): array
    {
        return ['mappings' => $server->segmentMappings(), 'rss' => $server->rssShmemKb(), 'blocks' => $server->segmentBlocksKb()];
    }
}
