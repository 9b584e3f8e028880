#!/usr/bin/env bash
# Runs the benchmark: SlidingTimeWindowShm against Ganesha's Apcu and Redis adapters and a
# do-nothing adapter (the floor), in one process run, and prints the tables and the targets.
#
#   bash benches/run.sh
#
# On Debian 12 as root it installs what is missing (php-apcu, php-redis, redis-server, and
# what building the extension needs), builds the extension, starts a private redis-server on a
# free port of 127.0.0.1 (no persistence, in a temporary directory) and stops it at the end,
# whatever happens. Whatever cannot be installed or started is skipped with a line saying why.
# Ganesha is loaded as the tests load it: vendor/ after `composer install`, or GANESHA_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the extension needs to build (and Rust), as the tests and the demo do.
. .ci/install-deps

# What the bench compares against.
has_module() { php -m 2>/dev/null | grep -ix "$1" >/dev/null; } # grep reads all: no SIGPIPE under pipefail
missing=()
has_module apcu || missing+=(php-apcu)
has_module redis || missing+=(php-redis)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bench: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
            || echo "bench: could not install ${missing[*]}: the adapters that need them are skipped"
    else
        echo "bench: ${missing[*]} missing (install them as root): the adapters that need them are skipped"
    fi
fi

if [ ! -f vendor/autoload.php ] && [ -z "${GANESHA_DIR:-}" ] && command -v composer >/dev/null 2>&1; then
    composer install --no-interaction --quiet || true
fi

cargo build --release --quiet
extension="${CARGO_TARGET_DIR:-$PWD/target}/release/libganesha_shm.so"

# A private redis-server, stopped on exit whatever happens.
workdir=$(mktemp -d)
redis_pid=
bench_pid=
cleanup() {
    local pid
    for pid in $bench_pid $redis_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

redis_answers() { # port: whether PING gets +PONG
    local reply
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    read -r -t 1 reply <&3 || true
    exec 3<&- 3>&-
    [ "${reply%$'\r'}" = "+PONG" ]
}

export BENCH_REDIS_PORT= BENCH_REDIS_SKIP=
if ! command -v redis-server >/dev/null 2>&1; then
    BENCH_REDIS_SKIP="redis-server is not installed (Debian: apt-get install redis-server)"
elif ! has_module redis; then
    BENCH_REDIS_SKIP="the redis extension (phpredis) is not installed (Debian: apt-get install php-redis)"
else
    for attempt in 1 2 3; do
        port=$(php -r '$s = stream_socket_server("tcp://127.0.0.1:0"); echo substr(strrchr(stream_socket_get_name($s, false), ":"), 1);')
        redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$workdir" \
            --daemonize no --logfile "$workdir/redis.log" >/dev/null 2>&1 &
        redis_pid=$!
        for _ in $(seq 50); do
            redis_answers "$port" && { BENCH_REDIS_PORT=$port; break; }
            kill -0 "$redis_pid" 2>/dev/null || break
            sleep 0.1
        done
        [ -n "$BENCH_REDIS_PORT" ] && break
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
        redis_pid=
    done
    [ -n "$BENCH_REDIS_PORT" ] || BENCH_REDIS_SKIP="redis-server did not start: $(tail -n 1 "$workdir/redis.log" 2>/dev/null)"
fi

# In the background, so that a signal to this script runs the trap at once. The store is sized for
# the 60-bucket windows the adapter makes by default (ganesha_shm.max_buckets, see docs/settings.md).
php -d "extension=$extension" -d apc.enable_cli=1 -d ganesha_shm.max_buckets=60 benches/bench.php "$@" &
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
bench_pid=
exit "$status"
