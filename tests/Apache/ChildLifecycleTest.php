<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * Children come and go; the segment stays with the Apache parent. A child SIGKILLed in the
 * middle of a request, and children recycled by MaxConnectionsPerChild, are replaced by new
 * children, forked from the parent long after it created the segment: they see every count the
 * old ones made, exactly, and keep counting into the same counters.
 */
final class ChildLifecycleTest extends ApacheTestCase
{
    private const CHILDREN = 4;

    private const SIGKILL = 9;

    /** Seconds to wait for the blocked request to reach its child, and for the parent to replace the child. */
    private const WAIT_S = 10.0;

    public function testAChildKilledMidRequestIsReplacedAndNothingIsLost(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN);
        $before = $server->childPids();
        $done = Unique::name('killed_done_');
        $blocked = Unique::name('killed_blocked_');

        $total = self::total($server->clients(self::CHILDREN, self::native(), ['op' => 'increment', 'key' => $done], 10));
        self::assertSame([40, 0], [$total['ok'], $total['failed']]);

        // a request held at a barrier no other request joins: its child waits there, before
        // the increment, until it is killed
        $barrier = $server->barrier(2);
        $pending = $server->send(self::native(), ['op' => 'increment', 'key' => $blocked] + $barrier);
        $deadline = \microtime(true) + self::WAIT_S;
        while (($arrived = ApacheServer::arrivals($barrier)) === []) {
            if (\microtime(true) > $deadline) {
                self::fail("the request did not reach a child in 10 s\n" . $server->errorLog());
            }
            \usleep(5_000);
        }
        [$victim] = $arrived;
        self::assertContains($victim, $before, 'the request is served by one of the children');

        self::assertTrue(\posix_kill($victim, self::SIGKILL));
        [$answer] = HttpClient::finish([$pending]);
        self::assertSame(0, $answer['status'], 'the killed request got no answer: ' . $answer['error']);
        $after = $this->waitForReplacement($server, $victim, $before);

        $new = \array_values(\array_diff($after, $before));
        self::assertNotSame([], $new, 'a new child: ' . \implode(' ', $after));
        $seen = self::everyChild($server, self::native(), ['op' => 'load', 'keys' => [$done, $blocked]], \count($after));
        self::assertSame($after, \array_keys($seen));
        foreach ($seen as $pid => $read) {
            self::assertSame([$done => 40, $blocked => 0], $read['counts'], "child {$pid}" . (\in_array($pid, $new, true) ? ' (a new one)' : ''));
        }

        $total = self::total($server->clients(self::CHILDREN, self::native(), ['op' => 'increment', 'key' => $done], 10));
        self::assertSame([40, 0], [$total['ok'], $total['failed']]);
        foreach (self::everyChild($server, self::native(), ['op' => 'load', 'keys' => [$done]], self::CHILDREN) as $pid => $read) {
            self::assertSame([$done => 80], $read['counts'], "child {$pid}");
        }
        self::report(\sprintf('child %d SIGKILLed at a barrier, replaced by %s', $victim, \implode(' ', $new)));
    }

    public function testChildrenRecycledByMaxConnectionsPerChildKeepTheCounts(): void
    {
        $maxConnections = 5;
        $requests = 60;
        $server = $this->startApache(startServers: self::CHILDREN, directives: ['MaxConnectionsPerChild' => $maxConnections]);
        $before = $server->childPids();
        $key = Unique::name('recycled_');

        $total = self::total($server->clients(self::CHILDREN, self::native(), ['op' => 'increment', 'key' => $key], \intdiv($requests, self::CHILDREN)));

        self::assertSame([], $total['errors']);
        self::assertSame([$requests, 0], [$total['ok'], $total['failed']]);
        self::assertLessThanOrEqual($maxConnections, \max($total['pids']), 'no child serves more than MaxConnectionsPerChild connections: ' . self::describePids($total['pids']));
        self::assertGreaterThanOrEqual(\intdiv($requests, $maxConnections), \count($total['pids']), 'so at least 60 / 5 children served them');
        $seen = self::everyChild($server, self::native(), ['op' => 'load', 'keys' => [$key]], self::CHILDREN);
        // the 4 children of the start could serve 20 of the 60 requests at most: some were
        // replaced, and so are some of the children now
        self::assertNotSame([], \array_diff(\array_keys($seen), $before), 'children of the start were recycled');
        foreach ($seen as $pid => $answer) {
            self::assertSame([$key => $requests], $answer['counts'], "child {$pid}");
        }
        self::report(\sprintf('MaxConnectionsPerChild=%d: %d increments served by %d children in %.1f s (%s)', $maxConnections, $requests, \count($total['pids']), $total['seconds'], self::describePids($total['pids'])));
    }

    /**
     * Waits until the parent replaced the killed child: it is gone, and as many children as
     * before run, one of them new.
     *
     * @param list<int> $before
     * @return list<int> the children then
     */
    private function waitForReplacement(ApacheServer $server, int $killed, array $before): array
    {
        $deadline = \microtime(true) + self::WAIT_S;
        while (ProcFs::alive($killed) || \in_array($killed, $children = $server->childPids(), true)
            || \count($children) < \count($before) || \array_diff($children, $before) === []) {
            if (\microtime(true) > $deadline) {
                self::fail(\sprintf("the parent did not replace child %d in %.0f s\n%s", $killed, self::WAIT_S, $server->errorLog()));
            }
            \usleep(10_000);
        }

        return $children;
    }
}
