<?php

/*
 * The tables of benches/web.sh, from the results it wrote: one line a wrk run, tab-separated
 * round, services, connections, endpoint and wrk.lua's WRK line.
 *
 *   php benches/web/report.php RESULTS WORKERS DURATION
 *
 * Figures are medians over the rounds. A ratio to the do-nothing adapter ("null") is taken
 * round by round, the endpoints of one round having run one after the other, and its median is
 * printed, so that the machine's drift over the run hits every endpoint alike.
 */

declare(strict_types=1);

const GOAL = 0.02;   // SlidingTimeWindowShm within 2 % of the do-nothing adapter
const FLEET_GOAL = 0.97;   // fleet mode at least 0.97 of local SlidingTimeWindowShm, req/s and p99
const NAMES = [
    'plain' => 'plain PHP, no Ganesha',
    'null' => 'Ganesha, do-nothing adapter',
    'shm' => 'SlidingTimeWindowShm',
    'fleet' => 'SlidingTimeWindowShm, fleet mode',
    'apcu' => 'Ganesha Apcu',
    'redis' => 'Ganesha Redis',
];

[, $file, $workers, $duration] = $argv + [null, null, '?', '?'];
$runs = [];   // [services][connections][endpoint][round] => figures
foreach (file((string) $file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    [$round, $services, $connections, $endpoint, $wrk] = explode("\t", $line);
    preg_match_all('/(\w+)=(\d+)/', $wrk, $m);
    $f = array_map('intval', array_combine($m[1], $m[2]));
    $runs[(int) $services][(int) $connections][$endpoint][(int) $round] = [
        'rps' => $f['requests'] / max(1, $f['duration_us']) * 1e6,
        'p50' => $f['p50_us'],
        'p99' => $f['p99_us'],
        'p999' => $f['p999_us'],
        'errors' => $f['non2xx'] + $f['connect'] + $f['read'] + $f['write'] + $f['timeout'] + ($f['requests'] - $f['counted'] - $f['non2xx']),
    ];
}

function median(array $values): float
{
    sort($values);
    $n = count($values);

    return $n === 0 ? NAN : ($n % 2 ? $values[intdiv($n, 2)] : ($values[$n / 2 - 1] + $values[$n / 2]) / 2);
}

function ms(float $us): string
{
    return number_format($us / 1000, 2) . ' ms';
}

$met = true;
$misses = [];
printf("\n%d workers (pm=static), %s s a run, medians of %d rounds\n", $workers, $duration, count(reset($runs)[array_key_first(reset($runs))]['null'] ?? []));
foreach ($runs as $services => $byConnections) {
    printf("\n%s\n\n", $services === 1 ? 'One service' : number_format($services) . ' services, each request on one at random');
    echo "| connections | endpoint | req/s | req/s ÷ do-nothing | p50 | p99 | p99 ÷ do-nothing | p99.9 | errors |\n";
    echo "|---|---|---|---|---|---|---|---|---|\n";
    foreach ($byConnections as $connections => $byEndpoint) {
        $floor = $byEndpoint['null'] ?? [];
        foreach ($byEndpoint as $endpoint => $byRound) {
            $rpsRatio = $p99Ratio = [];
            foreach ($byRound as $round => $figures) {
                if (isset($floor[$round])) {
                    $rpsRatio[] = $figures['rps'] / $floor[$round]['rps'];
                    $p99Ratio[] = $figures['p99'] / max(1, $floor[$round]['p99']);
                }
            }
            $rps = median(array_column($byRound, 'rps'));
            printf(
                "| %d | %s | %s | %s | %s | %s | %s | %s | %d |\n",
                $connections,
                NAMES[$endpoint] ?? $endpoint,
                number_format($rps),
                $endpoint === 'null' ? '1' : sprintf('%.3f', median($rpsRatio)),
                ms(median(array_column($byRound, 'p50'))),
                ms(median(array_column($byRound, 'p99'))),
                $endpoint === 'null' ? '1' : sprintf('%.3f', median($p99Ratio)),
                ms(median(array_column($byRound, 'p999'))),
                array_sum(array_column($byRound, 'errors')),
            );
            if ($endpoint === 'shm') {
                $r = median($rpsRatio);
                $p = median($p99Ratio);
                if ($r < 1 - GOAL || $p > 1 + GOAL) {
                    $met = false;
                    $misses[] = sprintf('%d services at %d connections: req/s %.3f×, p99 %.3f×', $services, $connections, $r, $p);
                }
            }
        }
    }
}
// Fleet mode against local SlidingTimeWindowShm, round by round.
$fleetRows = [];
$fleetMet = true;
foreach ($runs as $services => $byConnections) {
    foreach ($byConnections as $connections => $byEndpoint) {
        if (!isset($byEndpoint['fleet'], $byEndpoint['shm'])) {
            continue;
        }
        $rpsRatio = $p99Ratio = [];
        foreach ($byEndpoint['fleet'] as $round => $figures) {
            if (isset($byEndpoint['shm'][$round])) {
                $rpsRatio[] = $figures['rps'] / $byEndpoint['shm'][$round]['rps'];
                $p99Ratio[] = $byEndpoint['shm'][$round]['p99'] / max(1, $figures['p99']);
            }
        }
        [$r, $p] = [median($rpsRatio), median($p99Ratio)];
        $fleetMet = $fleetMet && $r >= FLEET_GOAL && $p >= FLEET_GOAL;
        $fleetRows[] = sprintf("| %s | %d | %.3f | %.3f |\n", $services === 1 ? '1' : number_format($services), $connections, $r, $p);
    }
}
if ($fleetRows !== []) {
    echo "\nFleet mode ÷ local SlidingTimeWindowShm (req/s, and local p99 ÷ fleet p99: above 1 is faster)\n\n";
    echo "| services | connections | req/s ratio | p99 ratio |\n|---|---|---|---|\n";
    echo implode('', $fleetRows);
    printf("\nGoal: fleet mode at least %.2f of local SlidingTimeWindowShm in req/s and p99: %s\n", FLEET_GOAL, $fleetMet ? 'met' : 'not met');
}
printf(
    "\nGoal: SlidingTimeWindowShm within %d %% of the do-nothing adapter's req/s and p99 at every concurrency: %s\n",
    GOAL * 100,
    $met ? 'met' : 'not met (' . implode('; ', $misses) . ')',
);
