#!/usr/bin/env bash
# The scale section of the benchmark: how the store's costs follow what is stored, not the
# capacity. For max_services of 1k, 100k and 1M (one PHP process each: the setting is read at
# startup), prints the time and RssShmem growth of the first ganesha_shm_info(), snapshot() and
# metrics() with 100 services stored (and the median of 9 calls after it), then the cost of
# increment, load, an absent load and a refused new key at 10, 50 and 100 % of max_services
# stored, and after churn: once all of them have expired and 10 % new ones are stored. Medians
# of 7 batches, as benches/run.sh.
#
#   bash benches/scale.sh            # CAPACITIES="1000 100000", PERCENTS="10 50" to choose
#
# The 1M row fills up to 6 GB of shared memory (the segment with its headroom). Needs Ganesha
# (vendor/ or GANESHA_DIR), as benches/run.sh. Builds the extension; installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
extension="${CARGO_TARGET_DIR:-$PWD/target}/release/libganesha_shm.so"
capacities=${CAPACITIES:-"1000 100000 1048576"}

results=()
for capacity in $capacities; do
    results+=("$(php -d "extension=$extension" -d "ganesha_shm.max_services=$capacity" -d memory_limit=1G benches/scale.php)")
done

printf '%s\n' "${results[@]}" | php -r '
$rows = array_map(fn ($line) => json_decode($line, true), array_filter(explode("\n", stream_get_contents(STDIN))));
echo "\nWith 100 services stored: time of the first call and its RssShmem growth; median of 9 more\n\n";
echo "| max_services | ganesha_shm_info() | snapshot() | metrics() |\n|---|---|---|---|\n";
foreach ($rows as $r) {
    $cell = fn ($c) => sprintf("%.3f ms, +%d kB; %.3f ms", $c["ms"], $c["rss_kb"], $c["again_ms"]);
    printf("| %s | %s | %s | %s |\n", number_format($r["capacity"]), $cell($r["observe"]["info"]), $cell($r["observe"]["snapshot"]), $cell($r["observe"]["metrics"]));
}
echo "\nPer call, by share of max_services stored (ns, median of 7 batches)\n\n";
echo "| max_services | stored | increment | load | absent load | new key, full |\n|---|---|---|---|---|---|\n";
foreach ($rows as $r) {
    foreach ($r["ops"] as $percent => $o) {
        printf("| %s | %d %% | %.0f | %.0f | %.0f | %s |\n", number_format($r["capacity"]), $percent, $o["increment"], $o["load"], $o["absent_load"], isset($o["new_key_when_full"]) ? sprintf("%.0f (%s)", $o["new_key_when_full"], $o["refused"] === "not refused" ? "NOT refused" : "refused") : "");
    }
    if (isset($r["churn"])) {
        $o = $r["churn"];
        printf("| %s | 10 %% after churn | %.0f | %.0f | %.0f | |\n", number_format($r["capacity"]), $o["increment"], $o["load"], $o["absent_load"]);
    }
}
'
