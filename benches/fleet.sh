#!/usr/bin/env bash
# Fleet mode's cost, by the number of hosts: for 2, 10, 30 and 100 hosts (HOSTS to choose), each
# counting the same 1,000 services (SERVICES) with events in 10 buckets, what one host's syncs
# cost the sidecar and Redis (a redis-server on the loopback, started and stopped here).
#
# The other hosts' data is published by one `ganesha-shm-fleet --syncs 1` run each, on a copy of
# a filled segment given an id of its own (a copy is otherwise the same host). Then one host,
# on a copy of its own, runs three syncs, 3 s apart:
#   first   its first sync: publishes every bucket and reads every sum;
#   steady  nothing new anywhere;
#   busy    after a new failure and a new success of every service on this host, in the
#           current bucket;
# and, in a sidecar of its own, a fourth:
#   fleet   after another host changed every service too: every sum is read again (what every
#           sync costs when the whole fleet is busy).
# Last, TLS next to plain: with the last number of hosts, a new host's three syncs over the
# plain port and then over the TLS port of the same redis-server (a CA and a certificate made
# here with openssl), with the time each sync took (its first connects, and shakes hands).
# For each: the sidecar's CPU (its own report), Redis's CPU (INFO cpu, before and after, less
# what Redis spends idle over the same time), the bytes Redis sent, and the fleet's load on Redis
# at a 1 s interval: Redis's CPU per host sync times the hosts; for the busy and fleet syncs, which
# change every service, Redis's CPU in the script per service changed (goal: at most 5 µs). Then
# Redis's memory per service and host (INFO used_memory after the fill).
#
# Last, the storm: STORM_HOSTS hosts (100) run a sidecar each at a 1 s interval, as a fleet does,
# until every host's view is exact (its last sync fresh, and every counter's fleet ring holding
# what the other hosts counted: checked in the segments by crates/fleet/examples/fleet_views.rs);
# then Redis loses everything (FLUSHALL), and the row says how many seconds until every view is
# exact again, Redis's CPU meanwhile, the sidecars' (they share this machine's cores with Redis),
# and Redis's CPU per host in the script; then one host's first sync alone, on an empty Redis
# and on one the other hosts filled. Goal: under 30 s, and a first sync at most 20 ms of Redis
# at 1,000 services.
#
#   bash benches/fleet.sh            # HOSTS="2 10 30 100" SERVICES=1000 STORM_HOSTS=100
#   STORM_ONLY=1 bash benches/fleet.sh   # the storm alone
#   STORM_PIN=1 ...                       # the storm with Redis on core 0, the sidecars on the others
#   STORM_LOGS=/some/dir ...              # keeps the storm's sidecar logs there
#
# Builds the extension and the sidecar; needs redis-server, redis-cli and Ganesha (GANESHA_DIR or
# vendor/); installs nothing. Run it alone: it measures CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
cargo build --release --quiet -p ganesha-shm-fleet --example fleet_views
target=${CARGO_TARGET_DIR:-$PWD/target}
extension="$target/release/libganesha_shm.so"
sidecar="$target/release/ganesha-shm-fleet"
views="$target/release/examples/fleet_views"
for tool in redis-server redis-cli php openssl; do
    command -v "$tool" >/dev/null || { echo "fleet bench: $tool is missing (apt-get install redis-server php-cli)" >&2; exit 1; }
done
services=${SERVICES:-1000}
storm_hosts=${STORM_HOSTS:-100}
storm_only=${STORM_ONLY:-0}
storm_pin=${STORM_PIN:-0}
work=$(mktemp -d /tmp/ganesha-shm-fleet-bench.XXXXXX)
free_port() { php -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);'; }
port=$(free_port)
tls_port=$(free_port)
# A CA, and the server's certificate for 127.0.0.1 that it signed, for the TLS port.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.crt" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/server.key" -out "$work/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\n') -out "$work/server.crt" 2>/dev/null
redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$work" --daemonize no \
    --tls-port "$tls_port" --tls-cert-file "$work/server.crt" --tls-key-file "$work/server.key" \
    --tls-ca-cert-file "$work/ca.crt" --tls-auth-clients no --logfile "$work/redis.log" >/dev/null 2>&1 &
redis_pid=$!
# The storm's sidecars, and its sampler of Redis's figures, by pid (stopped at its end, or here
# if the bench stops before).
storm_pids=()
sampler_pid=
stop_storm() {
    if ((${#storm_pids[@]} > 0)); then
        kill "${storm_pids[@]}" 2>/dev/null || true
        wait "${storm_pids[@]}" 2>/dev/null || true
    fi
    storm_pids=()
}
stop_sampler() {
    if [ -n "$sampler_pid" ]; then
        kill "$sampler_pid" 2>/dev/null || true
        wait "$sampler_pid" 2>/dev/null || true
    fi
    sampler_pid=
}
trap 'stop_sampler; stop_storm; kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do sleep 0.05; done
cli() { redis-cli -p "$port" "$@"; }

# PHP in fleet mode on segment $1: with "fill", each of the services gets a failure and a success
# in each of its last 10 one-second buckets (a window of 60 s); with "busy", one more of each now.
php_on() {
    php -n -d "extension=$extension" -d "ganesha_shm.path=$1" -d ganesha_shm.fleet=1 \
        -d "ganesha_shm.max_services=$((services + 16))" -r '
        [, $root, $services, $what] = $argv;
        if ((require $root . "/tests/autoload.php") !== null) { fwrite(STDERR, "fleet bench: Ganesha is missing (GANESHA_DIR)\n"); exit(1); }
        $now = time();
        $time = $now;
        $adapter = new Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm(1, function () use (&$time) { return $time; });
        Ackintosh\Ganesha\Builder::withRateStrategy()->adapter($adapter)->timeWindow(60)->failureRateThreshold(50)
            ->minimumRequests(10)->intervalToHalfOpen(5)->build();
        $buckets = $what === "fill" ? 10 : 1;
        for ($s = 0; $s < $services; ++$s) {
            for ($b = $buckets - 1; $b >= 0; --$b) {
                $time = $now - $b;
                $adapter->increment("ganesha_service$s" . "_failure");
                $adapter->increment("ganesha_service$s" . "_success");
            }
        }' "$PWD" "$services" "$2"
}

# A copy of the filled segment as another host: the same counts, an id of its own (the header's
# word 16, see crates/core/src/segment.rs), and no record of the file it was made in (words 22
# and 23), by which its sidecar would find it a copy of the filled one and renew its id.
copy_as_new_host() {
    cp "$work/filled.segment" "$1"
    head -c 8 /dev/urandom | dd of="$1" bs=8 seek=16 conv=notrunc status=none
    dd if=/dev/zero of="$1" bs=8 seek=22 count=2 conv=notrunc status=none
}

# Redis's CPU seconds, less what it spends on its own (its timers, and these INFO calls) at the
# idle rate measured before the first row: what the syncs cost alone.
redis_cpu_raw() { cli info cpu | awk -F: '/^used_cpu_(sys|user):/ { sum += $2 } END { printf "%.6f", sum }'; }
redis_cpu() { awk -v c="$(redis_cpu_raw)" -v t="$(date +%s.%N)" -v r="$idle_rate" 'BEGIN { printf "%.6f", c - r * t }'; }
idle_rate=0
idle_from=$(redis_cpu_raw)
idle_at=$(date +%s.%N)
for _ in 1 2 3 4 5 6 7 8 9 10; do sleep 0.5; redis_cpu_raw >/dev/null; done
idle_rate=$(awk -v a="$(redis_cpu_raw)" -v b="$idle_from" -v t="$(date +%s.%N)" -v s="$idle_at" 'BEGIN { printf "%.9f", (a - b) / (t - s) }')
redis_sent() { cli info stats | awk -F: '/^total_net_output_bytes:/ { print $2 + 0 }'; }
# Microseconds Redis spent in the sync's script calls since the last reset (INFO commandstats'
# EVALSHA, which counts the commands the script runs; the few marks beside it cost microseconds):
# precise, where INFO cpu has Redis's timers in it; without the reading and writing of the
# connection.
redis_usec() {
    cli info commandstats | awk -F'[=,:]' '$1 == "cmdstat_evalsha" { sum += $5 } END { print sum + 0 }'
}
# Starts a sync's figures: zeroes the command statistics and the bytes sent.
start_figures() {
    cli config resetstat >/dev/null
    cpu=$(redis_cpu)
    sent=$(redis_sent)
}

# One row, from the sync's figures started by start_figures: label, hosts, the sidecar's report line.
row() {
    local label=$1 hosts=$2 line=$3
    local sidecar_cpu redis_ms usec bytes
    sidecar_cpu=$(sed -nE 's/.*, ([0-9.]+) ms of CPU$/\1/p' <<<"$line")
    bytes=$(($(redis_sent) - sent))
    usec=$(redis_usec)
    redis_ms=$(awk -v a="$(redis_cpu)" -v b="$cpu" 'BEGIN { printf "%.1f", (a - b) * 1000 }')
    row_usec=$usec
    # Per service whose counts changed: every service, in the busy and fleet syncs.
    local per_service="–"
    case $label in busy | fleet) per_service=$(awk -v u="$usec" -v s="$services" 'BEGIN { printf "%.2f µs", u / s }') ;; esac
    printf '| %s | %s | %s ms | %s ms | %.1f ms | %s | %s | %s %% |\n' "$hosts" "$label" "$sidecar_cpu" "$redis_ms" \
        "$(awk -v u="$usec" 'BEGIN { print u / 1000 }')" "$per_service" "$bytes" \
        "$(awk -v u="$usec" -v h="$hosts" 'BEGIN { printf "%.0f", u / 1e6 * h * 100 }')"
}

# The head of the tables of rows.
row_head() {
    echo "| hosts | sync | sidecar CPU | Redis CPU (INFO cpu) | Redis CPU in the script | in the script, per service changed | bytes Redis sent | the fleet's Redis load at 1 s (in the script) |"
    echo "|---|---|---|---|---|---|---|---|"
}

if ((storm_only == 0)); then
    echo "Fleet sidecar: one host's syncs, $services services counted by every host, events in 10 buckets (one redis-server, loopback)"
    echo "(Redis idle, sampled as below: $(awk -v r="$idle_rate" 'BEGIN { printf "%.2f", r * 1000 }') ms of CPU a second, taken off each sync's figure)"
    echo
    row_head
    memory_rows=()
    for hosts in ${HOSTS:-2 10 30 100}; do
        cli flushall >/dev/null
        # Filled afresh for each row, so that every bucket is still in the window when it is measured.
        rm -f "$work/filled.segment"
        php_on "$work/filled.segment" fill
        empty=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
        for ((i = 1; i < hosts; ++i)); do
            copy_as_new_host "$work/other.segment"
            "$sidecar" --segment "$work/other.segment" --redis "redis://127.0.0.1:$port" --fleet bench --host "other$i" \
                --interval-ms 100 --syncs 1 >/dev/null 2>>"$work/sidecar.log"
        done
        filled=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
        if ((hosts > 1)); then
            memory_rows+=("| $hosts | $(((filled - empty) / ((hosts - 1) * services))) |")
        fi

        copy_as_new_host "$work/host.segment"
        # Three syncs 3 s apart; Redis's counters are read as each sync's line comes, and the
        # busy step runs right after the steady sync.
        n=0
        start_figures
        while IFS= read -r line; do
            n=$((n + 1))
            case $n in
                1) row first "$hosts" "$line" ;;
                2) row steady "$hosts" "$line"
                   php_on "$work/host.segment" busy ;;
                3) row busy "$hosts" "$line" ;;
            esac
            start_figures
        done < <("$sidecar" --segment "$work/host.segment" --redis "redis://127.0.0.1:$port" --fleet bench --host measured \
            --interval-ms 3000 --syncs 3 2>>"$work/sidecar.log")

        # The whole fleet busy: another host changes every service, then this host syncs again.
        if ((hosts > 1)); then
            n=0
            while IFS= read -r line; do
                n=$((n + 1))
                if ((n == 1)); then
                    php_on "$work/other.segment" busy
                    "$sidecar" --segment "$work/other.segment" --redis "redis://127.0.0.1:$port" --fleet bench --host other \
                        --interval-ms 100 --syncs 1 >/dev/null 2>>"$work/sidecar.log"
                    start_figures
                else
                    row fleet "$hosts" "$line"
                fi
            done < <("$sidecar" --segment "$work/host.segment" --redis "redis://127.0.0.1:$port" --fleet bench --host measured \
                --interval-ms 3000 --syncs 2 2>>"$work/sidecar.log")
        fi
    done

    echo
    echo "Redis's memory per service and host (INFO used_memory after the other hosts published, $services services, events in 10 buckets)"
    echo
    echo "| hosts | bytes per service and host |"
    echo "|---|---|"
    printf '%s\n' "${memory_rows[@]}"

    # TLS next to plain, with the last number of hosts' data in Redis: a new host's first, steady and
    # busy syncs over each port.
    echo
    echo "TLS next to plain: a new host's syncs over the plain port, then the TLS port, of the same redis-server ($hosts hosts, $services services)"
    echo
    echo "| transport | sync | sync time | sidecar CPU | Redis CPU in the script | bytes Redis sent |"
    echo "|---|---|---|---|---|---|"
    for transport in plain TLS; do
        if [ "$transport" = TLS ]; then
            flags=(--redis "rediss://127.0.0.1:$tls_port" --tls-ca-file "$work/ca.crt")
        else
            flags=(--redis "redis://127.0.0.1:$port")
        fi
        copy_as_new_host "$work/host.segment"
        n=0
        start_figures
        while IFS= read -r line; do
            n=$((n + 1))
            label=(first steady busy)
            printf '| %s | %s | %s ms | %s ms | %.1f ms | %s |\n' "$transport" "${label[n - 1]}" \
                "$(sed -nE 's/.*, ([0-9.]+) ms, [0-9.]+ ms of CPU$/\1/p' <<<"$line")" \
                "$(sed -nE 's/.*, ([0-9.]+) ms of CPU$/\1/p' <<<"$line")" \
                "$(awk -v u="$(redis_usec)" 'BEGIN { print u / 1000 }')" "$(($(redis_sent) - sent))"
            ((n == 2)) && php_on "$work/host.segment" busy
            start_figures
        done < <("$sidecar" --segment "$work/host.segment" "${flags[@]}" --fleet bench --host "measured-$transport" \
            --interval-ms 3000 --syncs 3 2>>"$work/sidecar.log")
    done
fi

# The storm: STORM_HOSTS hosts, each with a sidecar at a 1 s interval, as a fleet runs; every
# host counted what the fill counts (one failure and one success of every service in each of the
# last 10 one-second buckets: 10 of each per host), so every host's view is exact when its last
# sync is fresh and every counter's fleet ring holds (hosts - 1) × 10. The views are read in the
# segments by fleet_views (crates/fleet/examples/fleet_views.rs), every 100 ms.
#
# The fill's oldest bucket (10 s before it) leaves the 60 s window 51 s after the fill: every
# figure must be taken before, and a wait that would end later is said to, not measured.
storm_window_s=51
echo
echo "Storm: $storm_hosts hosts, $services services each, a sidecar each at a 1 s interval; every view exact, then Redis loses everything (FLUSHALL)"
# With STORM_PIN=1, Redis has core 0 during the storm, and the sidecars the others: Redis's
# figures are then those of a Redis of its own. The checker runs beside Redis: among the sidecars
# it would wait for the CPU, and its reading of every counter (some 150 ms of CPU, once) would
# take seconds and lengthen the figure it measures; beside Redis, which is mostly idle, its polls
# cost Redis a few milliseconds each.
pin=()
pin_views=()
if ((storm_pin == 1 && $(nproc) > 1)); then
    taskset -cp 0 "$redis_pid" >/dev/null
    pin=(taskset -c "1-$(($(nproc) - 1))")
    pin_views=(taskset -c 0)
    echo "(STORM_PIN=1: Redis on core 0 during the storm, with fleet_views; the $storm_hosts sidecars on the other $(($(nproc) - 1)))"
else
    echo "(this machine has $(nproc) cores: the $storm_hosts sidecars compete with Redis for them, so Redis's figures are those of a Redis sharing its cores with the fleet; STORM_PIN=1 gives Redis a core of its own)"
fi
echo
storm_dir="$work/storm"
mkdir -p "$storm_dir"
redis_url="redis://127.0.0.1:$port"
expected_own=10
expected_fleet=$(((storm_hosts - 1) * expected_own))
clock_ticks=$(getconf CLK_TCK)

# CPU seconds the storm's sidecars used so far (utime + stime of /proc/<pid>/stat, fields 14
# and 15, counted after the command's name, which ends with ") ").
sidecars_cpu() {
    local pid
    for pid in "${storm_pids[@]}"; do cat "/proc/$pid/stat" 2>/dev/null || true; done |
        awk -v hz="$clock_ticks" '{ sub(/^.*\) /, ""); split($0, f, " "); t += f[12] + f[13] } END { printf "%.2f", t / hz }'
}
sidecars_alive() {
    local pid alive=0
    for pid in "${storm_pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
    echo "$alive"
}
# Seconds of the fill's window left now.
window_left() { echo $((fill_at + storm_window_s - $(date +%s))); }

# Waits until every view is exact, within what is left of the window; sets $took to the seconds
# since $1 (unix seconds), or "> N s" when the window ran out first, $views_line to the checker's
# line and $views_rc to its exit status.
wait_exact() {
    local since=$1 left
    left=$(window_left)
    views_rc=0
    if ((left <= 0)); then
        views_line="the fill's buckets left the window before the wait started"
        views_rc=3
    else
        views_line=$("${pin_views[@]}" "$views" --services "$services" --expect-own "$expected_own" --expect-fleet "$expected_fleet" \
            --until-exact --timeout-s "$left" --since "$since" --resynced "${storm_segments[@]}" 2>&1) || views_rc=$?
    fi
    case $views_rc in
        0) took=$(sed -nE 's/^exact after ([0-9.]+) s.*/\1 s/p' <<<"$views_line") ;;
        2) took="(not measured: fleet_views failed)" ;;
        *) took=$(awk -v n="$(date +%s.%N)" -v s="$since" 'BEGIN { printf "> %.1f s (not exact when the fill left the window)", n - s }') ;;
    esac
}

# What the sidecars logged since the line starting with $1 (since they started, for ""), for the
# words that tell why a sync failed.
log_summary() {
    awk -v mark="$1" '
        BEGIN { n = split("lost|Redis lost|lost redis://|could not sync|no reply within|cannot connect|resumed after", words, "|") }
        FNR == 1 { after = (mark == "") }
        mark != "" && index($0, mark) == 1 { after = 1; next }
        after { for (i = 1; i <= n; ++i) if (index($0, words[i])) {
            lines[i]++
            if (!((i, FILENAME) in seen)) { seen[i, FILENAME] = 1; hosts[i]++ }
            if (!(i in example)) example[i] = $0
        } }
        END { for (i = 1; i <= n; ++i) printf "    \"%s\": %d lines from %d hosts%s\n", words[i], lines[i], hosts[i], (i in example) ? ", e.g. " example[i] : "" }
    ' "$storm_dir"/host*.log
}

storm_row() {
    local label=$1 took=$2 redis_from=$3 sidecars_from=$4 wall_from=$5
    local wall redis_s sidecars_s usec
    wall=$(awk -v n="$(date +%s.%N)" -v s="$wall_from" 'BEGIN { print n - s }')
    redis_s=$(awk -v a="$(redis_cpu)" -v b="$redis_from" 'BEGIN { printf "%.2f", a - b }')
    sidecars_s=$(awk -v a="$(sidecars_cpu)" -v b="$sidecars_from" 'BEGIN { printf "%.2f", a - b }')
    usec=$(redis_usec)
    printf '| %s | %s | %s | %s | %s s (%.0f %% of a core) | %.1f ms | %.1f ms | %s s (%.0f %% of %s cores) |\n' \
        "$storm_hosts" "$services" "$label" "$took" "$redis_s" "$(awk -v c="$redis_s" -v w="$wall" 'BEGIN { print c / w * 100 }')" \
        "$(awk -v c="$redis_s" -v h="$storm_hosts" 'BEGIN { print c / h * 1000 }')" \
        "$(awk -v u="$usec" -v h="$storm_hosts" 'BEGIN { print u / h / 1000 }')" \
        "$sidecars_s" "$(awk -v c="$sidecars_s" -v w="$wall" -v k="$(nproc)" 'BEGIN { print c / w / k * 100 }')" "$(nproc)"
}

cli flushall >/dev/null
rm -f "$work/filled.segment"
fill_at=$(date +%s)
php_on "$work/filled.segment" fill
storm_segments=()
for ((i = 1; i <= storm_hosts; ++i)); do
    copy_as_new_host "$storm_dir/host$i.segment"
    storm_segments+=("$storm_dir/host$i.segment")
done
echo "(filled and copied as $storm_hosts hosts in $(($(date +%s) - fill_at)) s; the fill's buckets stay in the window for $(window_left) s more)"
echo
echo "| hosts | services | event | until every view is exact | Redis CPU during it (INFO cpu) | Redis CPU per host (INFO cpu) | Redis in the script, per host | the sidecars' CPU during it |"
echo "|---|---|---|---|---|---|---|---|"
cli config resetstat >/dev/null
redis_from=$(redis_cpu)
sidecars_from=0
wall_from=$(date +%s.%N)
for ((i = 1; i <= storm_hosts; ++i)); do
    "${pin[@]}" "$sidecar" --segment "$storm_dir/host$i.segment" --redis "$redis_url" --fleet storm --host "storm$i" \
        --interval-ms 1000 >/dev/null 2>>"$storm_dir/host$i.log" &
    storm_pids+=($!)
done
wait_exact "$wall_from"
start_line=$views_line
storm_row "the fleet starts (Redis empty)" "$took" "$redis_from" "$sidecars_from" "$wall_from"
flush_line="(not run: the fleet never had every view exact)"
if ((views_rc == 0)); then
    # The poll that found every view exact read every counter: every host counted 10 of each
    # counter of every service (fleet_views --expect-own), the fill is as said.
    left=$(window_left)
    # The fleet in sync, nothing new anywhere: Redis's load over 2 s, in the script.
    cli config resetstat >/dev/null
    sleep 2
    steady_usec=$(redis_usec)
    mark="=== FLUSHALL at $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) ==="
    for ((i = 1; i <= storm_hosts; ++i)); do echo "$mark" >>"$storm_dir/host$i.log"; done
    cli config resetstat >/dev/null
    redis_from=$(redis_cpu)
    sidecars_from=$(sidecars_cpu)
    wall_from=$(date +%s.%N)
    cli flushall >/dev/null
    # Redis's time in the script, sampled every second from the FLUSHALL on.
    (while :; do echo "$(date +%s.%N) $(redis_usec)"; sleep 1; done) >"$storm_dir/usec.timeline" 2>/dev/null &
    sampler_pid=$!
    wait_exact "$wall_from"
    flush_line=$views_line
    storm_row "FLUSHALL" "$took" "$redis_from" "$sidecars_from" "$wall_from"
    flush_took=$took
    stop_sampler
    storm_usec=$(redis_usec)
    echo "$(date +%s.%N) $storm_usec" >>"$storm_dir/usec.timeline"
    if ((left < 30)); then
        echo "(only $left s of the fill's window were left at the FLUSHALL: a wait of 30 s or more could not be measured)"
    fi
fi
alive=$(sidecars_alive)
stop_storm
if ((${#pin[@]} > 0)); then
    taskset -cp "0-$(($(nproc) - 1))" "$redis_pid" >/dev/null
fi
echo
echo "fleet_views at the start: $start_line"
echo "fleet_views after the FLUSHALL: $flush_line"
if [ -s "$storm_dir/usec.timeline" ]; then
    echo "The fleet in sync before the FLUSHALL, nothing new: $(awk -v u="${steady_usec:-0}" -v h="$storm_hosts" \
        'BEGIN { printf "%.1f ms of Redis in the script a second, %.2f ms per host sync", u / 2000, u / 2000 / h }')"
    echo "Redis in the script after the FLUSHALL, second by second, the last one partial (all hosts): $(awk \
        'NR > 1 { printf "%s%.0f ms", sep, ($2 - last) / 1000; sep = ", " } { last = $2 }' "$storm_dir/usec.timeline")"
fi
if ((alive < storm_hosts)); then
    echo "Only $alive of the $storm_hosts sidecars were still running at the end: see their logs"
fi
echo "(Per host: over the wait, divided by the hosts: each host's first sync and every sync after it until every view is exact. Redis in the script is"
echo " INFO commandstats' EVALSHA time, which Redis clocks on the wall: when Redis waits for a core (the sidecars on its cores, or anything else the"
echo " machine runs), it counts the wait too, and exceeds INFO cpu, which is Redis's CPU time)"
echo
if [ -n "${flush_took:-}" ]; then
    # When each host's first sync after the FLUSHALL ended: it logs that Redis lost its data (once
    # in a while at most: a host whose loss went unlogged is left out).
    echo "Each host's first sync after the FLUSHALL, when it ended (its line saying Redis lost its data), seconds after the FLUSHALL: $(awk '
        function seconds(stamp) { split(substr(stamp, 12, 12), t, ":"); return t[1] * 3600 + t[2] * 60 + t[3] }
        FNR == 1 { at = -1 }
        index($0, "=== FLUSHALL at ") == 1 { at = seconds($4) }
        at >= 0 && index($0, "Redis lost") { d = seconds($1) - at; if (d < 0) d += 86400; print d; at = -1 }
    ' "$storm_dir"/host*.log | sort -n | awk '{ v[NR] = $1 } END {
        if (NR) printf "%d hosts, the first %.2f, the median %.2f, the last %.2f", NR, v[1], v[int((NR + 1) / 2)], v[NR]; else printf "none" }')"
    echo "What the sidecars logged after the FLUSHALL:"
    log_summary "=== FLUSHALL"
else
    echo "What the sidecars logged (no FLUSHALL):"
    log_summary ""
fi
if [ -n "${STORM_LOGS:-}" ]; then
    mkdir -p "$STORM_LOGS"
    cp "$storm_dir"/host*.log "$STORM_LOGS"/
    echo "(the sidecars' logs are in $STORM_LOGS)"
fi

# One host's first sync alone, on a Redis emptied and on one every other host filled: the rows of
# the table above, with a fill of their own (the storm's may have left the window).
echo
echo "One host's first sync alone ($storm_hosts hosts, $services services)"
echo
row_head
cli flushall >/dev/null
rm -f "$work/filled.segment"
fill_at=$(date +%s)
php_on "$work/filled.segment" fill
alone() {
    local label=$1 line
    copy_as_new_host "$work/alone.segment"
    start_figures
    line=$("$sidecar" --segment "$work/alone.segment" --redis "$redis_url" --fleet alone --host alone \
        --interval-ms 100 --syncs 1 2>>"$work/sidecar.log")
    row "$label" "$storm_hosts" "$line"
}
alone "first, Redis empty"
alone_empty_usec=$row_usec
cli flushall >/dev/null
for ((i = 1; i < storm_hosts; ++i)); do
    copy_as_new_host "$work/other.segment"
    "$sidecar" --segment "$work/other.segment" --redis "$redis_url" --fleet alone --host "other$i" \
        --interval-ms 100 --syncs 1 >/dev/null 2>>"$work/sidecar.log"
done
alone_filled_usec=
if (($(window_left) > 1)); then
    alone "first, Redis filled by $((storm_hosts - 1)) others"
    alone_filled_usec=$row_usec
else
    echo "(the $((storm_hosts - 1)) other hosts took too long to publish: the fill left the window, no row on a filled Redis)"
fi

echo
echo "Goals ($storm_hosts hosts, $services services):"
case ${flush_took:-} in
    "") echo "- every view exact again under 30 s after the FLUSHALL: not measured (no FLUSHALL: the fleet never had every view exact)" ;;
    ">"* | "("*) echo "- every view exact again under 30 s after the FLUSHALL: not met, or not measured: $flush_took" ;;
    *) echo "- every view exact again under 30 s after the FLUSHALL: $flush_took, $(awk -v t="${flush_took% s}" 'BEGIN { print (t < 30) ? "met" : "not met" }')" ;;
esac
for figure in "alone, Redis empty:$alone_empty_usec" "alone, Redis filled by the others:$alone_filled_usec"; do
    usec=${figure##*:}
    if [ -z "$usec" ]; then
        echo "- a first sync at most 20 ms of Redis (${figure%%:*}): not measured"
    else
        echo "- a first sync at most 20 ms of Redis (${figure%%:*}, in the script): $(awk -v u="$usec" \
            'BEGIN { printf "%.1f ms, %s", u / 1000, (u <= 20000) ? "met" : "not met" }')"
    fi
done
if [ -n "${storm_usec:-}" ]; then
    echo "- Redis in the script per host over the storm (its first sync and every sync after it until every view was exact): $(awk \
        -v u="$storm_usec" -v h="$storm_hosts" 'BEGIN { printf "%.1f ms", u / h / 1000 }')"
fi
