<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The promise of the README's first paragraph, under Apache's prefork MPM with mod_php: PHP
 * starts in the Apache parent, which creates the segment before it forks its children, so
 * every child counts into the same counters.
 *
 * Requests held together at a barrier are served at the same time by distinct children, each
 * incrementing one key many times: the count read back from any child is exactly the sum, in
 * one counter slot. Then many short requests from concurrent clients, each incrementing once:
 * every request counted, whichever child served it (children the parent forks later to meet
 * the load, long after the segment was created, included: the report says how many did).
 */
final class SharedCountersTest extends ApacheTestCase
{
    private const CHILDREN = 4;

    private const ROUNDS = 3;

    private const INCREMENTS = 500;

    private const CLIENTS = 8;

    private const REQUESTS_EACH = 25;

    public function testChildrenIncrementingAtOnceAddUpExactly(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN);
        $key = 'ganesha_' . Unique::name('shared.') . '_success';
        $pids = [];

        for ($round = 0; $round < self::ROUNDS; ++$round) {
            $answers = self::everyChild($server, self::native(), ['op' => 'increment', 'key' => $key, 'times' => self::INCREMENTS], self::CHILDREN);
            foreach ($answers as $pid => $answer) {
                self::assertNull($answer['error'], "child {$pid}, round {$round}");
                $pids[$pid] = true;
            }
        }

        $expected = self::ROUNDS * self::CHILDREN * self::INCREMENTS;
        foreach (self::everyChild($server, self::native(), ['op' => 'load', 'keys' => [$key]], self::CHILDREN) as $pid => $answer) {
            self::assertSame([$key => $expected], $answer['counts'], "child {$pid} reads every increment");
        }
        $info = $server->json(self::native(), ['op' => 'info'])['info'];
        self::assertSame(['anonymous', 1, 0], [$info['segment'], $info['counter_slots_used'], $info['status_slots_used']], 'one slot for the key, however many children created it at once');
        self::report(\sprintf('%d increments by %d children at once, %d rounds, children %s', $expected, self::CHILDREN, self::ROUNDS, \implode(' ', \array_keys($pids))));
    }

    public function testConcurrentClientsServedByEveryChildAddUpExactly(): void
    {
        $server = $this->startApache(startServers: self::CHILDREN, maxRequestWorkers: 8);
        $service = Unique::name('shared.');
        $key = "ganesha_{$service}_success";
        $requests = self::CLIENTS * self::REQUESTS_EACH;
        $atStart = $server->childPids();

        $total = self::total($server->clients(self::CLIENTS, self::native(), ['op' => 'increment', 'key' => $key], self::REQUESTS_EACH));

        self::assertSame([], $total['errors']);
        self::assertSame([$requests, $requests, 0], [$total['sent'], $total['ok'], $total['failed']]);
        self::assertGreaterThanOrEqual(2, \count($total['pids']), 'several children served the increments: ' . self::describePids($total['pids']));
        self::assertSame([$key => $requests], $server->json(self::native(), ['op' => 'load', 'keys' => [$key]])['counts']);
        if (Autoload::ganeshaMissing() === null) {
            // the same count through Ganesha's configuration of the keys (time window 600 s)
            $snapshot = $server->json(self::ganesha(), ['op' => 'snapshot', 'service' => $service, 'window' => 600])['snapshot'];
            self::assertSame([$requests, 0], [$snapshot['successes'], $snapshot['failures']]);
        }
        $later = \array_diff(\array_keys($total['pids']), $atStart);
        self::report(\sprintf(
            '%d increments by %d clients, served by children %s (%d forked after startup, under the load)',
            $requests,
            self::CLIENTS,
            self::describePids($total['pids']),
            \count($later)
        ));
    }
}
