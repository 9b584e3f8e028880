#!/usr/bin/env bash
# The fleet's deterministic simulation (crates/sim): plays histories of a fleet of simulated
# hosts (each an in-memory segment with the real store and the real sync) against real
# redis-servers, started here on the loopback and stopped by pid, under every fault; exit 0 when
# no history breaks an invariant, else the failing seed's history and the command that replays it.
#
#   bash tests/fleet-sim.sh --seeds N [--first S] [--seed S] [--hosts H] [--steps N]
#                           [--mutate NAME[+NAME…]] [--mutations] [--verbose] [--keep-going]
#                           [--known-broken S[,S…]] [--jobs J]
#   bash tests/fleet-sim.sh --teeth
#
# --teeth: each defense switched off breaks the seed named for it below, which holds with it on.
# --jobs J (default 2): J redis-servers and as many threads, each playing every J-th seed.
# --keep-going: every seed played, those that broke listed one line each.
# --known-broken S[,S…]: seeds of open defects, expected to break; one that holds fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=2
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --jobs) jobs=$2; shift 2 ;;
        --jobs=*) jobs=${1#--jobs=}; shift ;;
        *) args+=("$1"); shift ;;
    esac
done

cargo build --quiet --profile sim -p ganesha-shm-fleet-sim
sim=${CARGO_TARGET_DIR:-target}/sim/fleet-sim
for arg in "${args[@]}"; do
    if [ "$arg" = --mutations ]; then
        exec "$sim" --mutations
    fi
done
command -v redis-server >/dev/null || { echo "fleet-sim: redis-server is not installed (apt-get install redis-server)" >&2; exit 2; }

dir=$(mktemp -d)
pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap stop EXIT

# A port of the loopback each that nothing listens on (bash connects to it to see).
ports=()
for ((job = 0; job < jobs; job++)); do
    while :; do
        port=$((20000 + RANDOM % 30000))
        [[ " ${ports[*]} " == *" $port "* ]] && continue
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
    done
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
        --maxmemory-policy noeviction --loglevel warning --logfile "$dir/redis-$port.log" &
    pids+=($!)
    ports+=("$port")
done
for port in "${ports[@]}"; do
    deadline=$((SECONDS + 20))
    until redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            echo "fleet-sim: the redis-server on port $port did not answer within 20 s:" >&2
            cat "$dir/redis-$port.log" >&2
            exit 2
        fi
        sleep 0.1
    done
done

redis=$(IFS=,; echo "${ports[*]}")
for arg in "${args[@]}"; do
    if [ "$arg" = --teeth ]; then
        # Each defense switched off, on a seed that holds with it on (tests/run.sh plays those):
        # the seed must break. The merge ("counts-only-grow") is not here: the sequence covers
        # for it; nor "lease-refused", which no history plays (docs/development.md).
        teeth=(
            "reset-clock 1" "reset-monotonic 37" "reset-log 1" "reset-hides 1" "staleness 1" "birth 11"
            "copy-hands-all 28" "clock-figures 14"
            "sequence 230 --steady-clocks" "lost-sums-reset 150 --steady-clocks"
            "lost-sums-read 183 --steady-clocks" "copy-taken 12 --steady-clocks"
            "trial-lease 148 --steady-clocks"
        )
        for tooth in "${teeth[@]}"; do
            read -r mutation seed steady <<<"$tooth"
            "$sim" --redis "$redis" --mutate "$mutation" --seed "$seed" --known-broken "$seed" $steady
        done
        exit 0
    fi
done
"$sim" --redis "$redis" "${args[@]}"
