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
# at a 1 s interval: Redis's CPU per host sync times the hosts. Then Redis's memory per service and host (INFO used_memory after the fill).
#
#   bash benches/fleet.sh            # HOSTS="2 10 30 100" SERVICES=1000
#
# Builds the extension and the sidecar; needs redis-server, redis-cli and Ganesha (GANESHA_DIR or
# vendor/); installs nothing. Run it alone: it measures CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
target=${CARGO_TARGET_DIR:-$PWD/target}
extension="$target/release/libganesha_shm.so"
sidecar="$target/release/ganesha-shm-fleet"
for tool in redis-server redis-cli php openssl; do
    command -v "$tool" >/dev/null || { echo "fleet bench: $tool is missing (apt-get install redis-server php-cli)" >&2; exit 1; }
done
services=${SERVICES:-1000}
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
trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
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
# word 16, see crates/core/src/segment.rs).
copy_as_new_host() {
    cp "$work/filled.segment" "$1"
    head -c 8 /dev/urandom | dd of="$1" bs=8 seek=16 conv=notrunc status=none
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
    printf '| %s | %s | %s ms | %s ms | %.1f ms | %s | %s %% |\n' "$hosts" "$label" "$sidecar_cpu" "$redis_ms" \
        "$(awk -v u="$usec" 'BEGIN { print u / 1000 }')" "$bytes" \
        "$(awk -v u="$usec" -v h="$hosts" 'BEGIN { printf "%.0f", u / 1e6 * h * 100 }')"
}

echo "Fleet sidecar: one host's syncs, $services services counted by every host, events in 10 buckets (one redis-server, loopback)"
echo "(Redis idle, sampled as below: $(awk -v r="$idle_rate" 'BEGIN { printf "%.2f", r * 1000 }') ms of CPU a second, taken off each sync's figure)"
echo
echo "| hosts | sync | sidecar CPU | Redis CPU (INFO cpu) | Redis CPU in the script | bytes Redis sent | the fleet's Redis load at 1 s (in the script) |"
echo "|---|---|---|---|---|---|---|"
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
