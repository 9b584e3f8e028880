<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * What load clients of the web suites count (each a separate process sending requests one
 * after the other and printing JSON): requests sent, answered, failed with the first few
 * errors, and how many each server process (pid) served; and their totals.
 */
final class LoadResults
{
    /**
     * Totals of what load clients counted.
     *
     * @param list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}> $clients
     * @return array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}
     */
    public static function total(array $clients): array
    {
        $total = ['sent' => 0, 'ok' => 0, 'failed' => 0, 'pids' => [], 'errors' => [], 'seconds' => 0.0];
        foreach ($clients as $client) {
            $total['sent'] += $client['sent'];
            $total['ok'] += $client['ok'];
            $total['failed'] += $client['failed'];
            $total['errors'] = [...$total['errors'], ...$client['errors']];
            $total['seconds'] = \max($total['seconds'], $client['seconds']);
            foreach ($client['pids'] as $pid => $count) {
                $total['pids'][$pid] = ($total['pids'][$pid] ?? 0) + $count;
            }
        }
        \ksort($total['pids']);

        return $total;
    }

    /** @param array<int, int> $pids pid => requests served */
    public static function describePids(array $pids): string
    {
        $parts = [];
        foreach ($pids as $pid => $count) {
            $parts[] = "{$pid}×{$count}";
        }

        return \implode(' ', $parts);
    }
}
