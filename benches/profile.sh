#!/usr/bin/env bash
# Where the instructions of workloads (a) and (e) go: valgrind's callgrind counts the
# instructions of benches/profile.php over the do-nothing adapter (the floor) and over
# SlidingTimeWindowShm, each run twice (WARM and WARM + CYCLES cycles) so that PHP's startup
# cancels out, and prints the instructions per cycle by function: the total of each adapter,
# the functions that cost the most, and what the extension's own functions cost in all.
# (a) is isAvailable() + success() on a Ganesha built once; (e) is a request as php-fpm serves
# one: a new adapter, Builder::...->build() (which calls setContext()), then (a). Then the
# instructions of one refused new key on a full store, and the extension's share of them; and,
# when redis-server and the fleet sidecar are there, workload (a) in fleet mode.
#
#   bash benches/profile.sh [CYCLES]      (default 20000; GANESHA_SHM_EXT=... profiles another build)
#
# Instruction counts are repeatable where timings are not; they do not weigh cache misses.
# Needs Ganesha as the tests do (vendor/ or GANESHA_DIR) and valgrind (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

cycles=${1:-20000}
warm=2000
if ! command -v valgrind >/dev/null 2>&1; then
    echo "profile: installing valgrind"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi
extension=${GANESHA_SHM_EXT:-}
if [ -z "$extension" ]; then
    . .ci/install-deps
    cargo build --release --quiet
    extension="${CARGO_TARGET_DIR:-$PWD/target}/release/libganesha_shm.so"
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for workload in a e; do
    for adapter in floor shm; do
        for n in "$warm" "$((warm + cycles))"; do
            run=$out/$workload.$adapter.$n
            valgrind --tool=callgrind --callgrind-out-file="$run" \
                php -d "extension=$extension" benches/profile.php "$adapter" "$n" "$workload" 2>/dev/null
            callgrind_annotate --auto=no --threshold=100 --inclusive=no "$run" >"$run.self"
            callgrind_annotate --auto=no --threshold=100 --inclusive=yes "$run" >"$run.incl"
        done
    done
done
for n in "$warm" "$((warm + cycles))"; do
    valgrind --tool=callgrind --callgrind-out-file="$out/refuse.$n" \
        php -d "extension=$extension" -d ganesha_shm.max_services=1 benches/profile.php refuse "$n" 2>/dev/null
    callgrind_annotate --auto=no --threshold=100 --inclusive=no "$out/refuse.$n" >"$out/refuse.$n.self"
done

# Workload (a) in fleet mode: a segment file with ganesha_shm.fleet=1, its sidecar syncing it with
# a redis-server on the loopback (the fleet's counts decide, or would), when both are installed.
sidecar=$(dirname "$extension")/ganesha-shm-fleet
fleet=
if command -v redis-server >/dev/null && [ -x "$sidecar" ]; then
    port=$(php -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);')
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$out" --daemonize no \
        --logfile "$out/redis.log" >/dev/null 2>&1 &
    redis_pid=$!
    trap 'kill "${sidecar_pid:-}" "$redis_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT
    fleet_ini=(-d "ganesha_shm.path=$out/fleet.segment" -d ganesha_shm.fleet=1)
    php -d "extension=$extension" "${fleet_ini[@]}" -r 'exit(ganesha_shm_info()["fleet_attached"] ?? 2);' || true
    "$sidecar" --segment "$out/fleet.segment" --redis "redis://127.0.0.1:$port" --fleet profile --host a \
        --interval-ms 200 2>"$out/fleet.log" &
    sidecar_pid=$!
    until php -d "extension=$extension" "${fleet_ini[@]}" -r 'exit(ganesha_shm_info()["fleet_attached"] === 1 ? 0 : 1);'; do
        sleep 0.1
    done
    for n in "$warm" "$((warm + cycles))"; do
        run=$out/a.fleet.$n
        valgrind --tool=callgrind --callgrind-out-file="$run" \
            php -d "extension=$extension" "${fleet_ini[@]}" benches/profile.php shm "$n" a 2>/dev/null
        callgrind_annotate --auto=no --threshold=100 --inclusive=no "$run" >"$run.self"
    done
    fleet=yes
fi

php -- "$out" "$warm" "$((warm + cycles))" "$cycles" "$fleet" <<'PHP'
<?php
[, $dir, $warm, $long, $cycles, $fleet] = $argv + [5 => ''];

/** @return array<string, float> instructions per cycle by function */
function perCycle(string $dir, string $adapter, string $kind, string $warm, string $long, int $cycles): array
{
    $read = static function (string $file): array {
        $costs = [];
        foreach (file($file) as $line) {
            if (preg_match('/^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.+?)\s*$/', $line, $m) === 1) {
                // "file:function [object]": by function (a build with debug info splits a
                // function by the source file of what was inlined into it), object's base name
                $name = preg_replace(['/^\S*?:(?=[^:\s])/', '/ \[\S*\/([^\/\]]+)\]$/'], ['', ' [$1]'], $m[2]);
                $costs[$name] = ($costs[$name] ?? 0) + (int) str_replace(',', '', $m[1]);
            }
        }
        return $costs;
    };
    $a = $read("{$dir}/{$adapter}.{$warm}.{$kind}");
    $b = $read("{$dir}/{$adapter}.{$long}.{$kind}");
    $out = [];
    foreach ($b as $name => $cost) {
        $out[$name] = ($cost - ($a[$name] ?? 0)) / $cycles;
    }
    return $out;
}

$cycles = (int) $cycles;
$short = static fn (string $name): string => mb_strimwidth($name, 0, 110, '…');
$workloads = [
    'a' => ['(a) isAvailable() + success() cycle', 1.05],
    'e' => ['(e) request: new adapter + build() + isAvailable() + success()', 1.10],
];
foreach ($workloads as $workload => [$label, $goal]) {
    $floor = perCycle($dir, "{$workload}.floor", 'self', $warm, $long, $cycles);
    $shm = perCycle($dir, "{$workload}.shm", 'self', $warm, $long, $cycles);
    $shmIncl = perCycle($dir, "{$workload}.shm", 'incl', $warm, $long, $cycles);
    $floorTotal = $floor['PROGRAM TOTALS'];
    $shmTotal = $shm['PROGRAM TOTALS'];
    unset($floor['PROGRAM TOTALS'], $shm['PROGRAM TOTALS']);

    printf("===== workload %s\ninstructions per cycle (%d cycles, PHP startup subtracted)\n", $label, $cycles);
    printf("  do-nothing (floor)    %8.0f\n  SlidingTimeWindowShm  %8.0f  (%.3f× the floor, +%.0f; goal at most %.2f×: %s)\n\n",
        $floorTotal, $shmTotal, $shmTotal / $floorTotal, $shmTotal - $floorTotal, $goal,
        $shmTotal / $floorTotal <= $goal ? 'met' : 'NOT met');

    echo "SlidingTimeWindowShm: functions by own instructions per cycle (share of the cycle; floor's figure)\n";
    arsort($shm);
    $shown = 0;
    foreach ($shm as $name => $cost) {
        if ($cost < 0.5 || ++$shown > 30) {
            break;
        }
        printf("  %7.0f  %5.1f %%  floor %6.0f  %s\n", $cost, $cost / $shmTotal * 100, $floor[$name] ?? 0, $short($name));
    }

    echo "\nwhat costs more than over the floor (own instructions per cycle, shm − floor)\n";
    $delta = [];
    foreach ($shm + $floor as $name => $_) {
        $delta[$name] = ($shm[$name] ?? 0) - ($floor[$name] ?? 0);
    }
    arsort($delta);
    $shown = 0;
    foreach ($delta as $name => $cost) {
        if ($cost < 2 || ++$shown > 25) {
            break;
        }
        printf("  %+7.0f  %5.1f %% of the difference  %s\n", $cost, $cost / ($shmTotal - $floorTotal) * 100, $short($name));
    }

    echo "\nthe extension's functions, inclusive (with what they call), per cycle\n";
    $ext = array_filter($shmIncl, static fn (string $name): bool => str_contains($name, 'libganesha_shm') || str_contains($name, 'ganesha_shm::'), ARRAY_FILTER_USE_KEY);
    arsort($ext);
    $shown = 0;
    foreach ($ext as $name => $cost) {
        if ($cost < 2 || ++$shown > 25) {
            break;
        }
        printf("  %7.0f  %5.1f %%  %s\n", $cost, $cost / $shmTotal * 100, $short($name));
    }
    echo "\n";
}

$refuse = perCycle($dir, 'refuse', 'self', $warm, $long, $cycles);
$refuseTotal = $refuse['PROGRAM TOTALS'];
unset($refuse['PROGRAM TOTALS']);
$own = array_sum(array_filter($refuse, static fn (string $name): bool => str_contains($name, 'libganesha_shm'), ARRAY_FILTER_USE_KEY));
printf("\na new key refused on a full store (ganesha_shm.max_services=1), StorageException thrown and caught:\n");
printf("  %7.0f instructions, of which the extension's own functions %.0f (%.0f %%)\n", $refuseTotal, $own, $own / $refuseTotal * 100);

if ($fleet === 'yes') {
    $total = static fn (string $run): float => perCycle($dir, $run, 'self', $warm, $long, $cycles)['PROGRAM TOTALS'];
    [$floor, $local, $inFleet] = [$total('a.floor'), $total('a.shm'), $total('a.fleet')];
    printf("\nworkload (a) in fleet mode (ganesha_shm.fleet=1, the sidecar syncing every 200 ms, the fleet's counts fresh):\n");
    printf("  %7.0f instructions per cycle: %.3f× the floor, %+.0f (%.3f×) over local SlidingTimeWindowShm\n", $inFleet, $inFleet / $floor, $inFleet - $local, $inFleet / $local);
} else {
    printf("\nworkload (a) in fleet mode: not measured (it needs redis-server and the sidecar beside the extension)\n");
}
PHP
