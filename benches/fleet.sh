#!/usr/bin/env bash
# The fleet sidecar's own cost: for 1, 100 and 10,000 services stored on each of two hosts
# (two segment files, one redis-server on the loopback), the Redis round trips of one sync and
# its time and CPU, as the sidecar reports them (`--syncs`): the first sync, which publishes
# every counter, and a steady one, when nothing changed; then Redis's memory per service and
# host (MEMORY USAGE of the services' hashes), for a service whose counters have events in 1
# bucket, and in each of 60.
#
#   bash benches/fleet.sh            # SERVICES="1 100 10000" to choose
#
# Builds the extension and the sidecar; needs redis-server and redis-cli; installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
extension="$PWD/target/release/libganesha_shm.so"
sidecar="$PWD/target/release/ganesha-shm-fleet"
for tool in redis-server redis-cli php; do
    command -v "$tool" >/dev/null || { echo "fleet bench: $tool is missing (apt-get install redis-server php-cli)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ganesha-shm-fleet-bench.XXXXXX)
port=$(php -r '$s = stream_socket_server("tcp://127.0.0.1:0"); $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);')
redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$work" --daemonize no \
    --logfile "$work/redis.log" >/dev/null 2>&1 &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do sleep 0.05; done
cli() { redis-cli -p "$port" "$@"; }

# Fills the fleet-mode segment $1 with $2 services: each gets a failure and a success in each of
# its last $3 one-second buckets (a window of 60 s), so that two of its three counters hold events.
fill() {
    php -n -d "extension=$extension" -d "ganesha_shm.path=$1" -d ganesha_shm.fleet=1 \
        -d "ganesha_shm.max_services=$(($2 + 16))" -r '
        [, $root, $services, $buckets] = $argv;
        if ((require $root . "/tests/autoload.php") !== null) { fwrite(STDERR, "fleet bench: Ganesha is missing (GANESHA_DIR)\n"); exit(1); }
        $now = time();
        $time = $now;
        $adapter = new Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm(1, function () use (&$time) { return $time; });
        Ackintosh\Ganesha\Builder::withRateStrategy()->adapter($adapter)->timeWindow(60)->failureRateThreshold(50)
            ->minimumRequests(10)->intervalToHalfOpen(5)->build();
        for ($s = 0; $s < $services; ++$s) {
            for ($b = $buckets - 1; $b >= 0; --$b) {
                $time = $now - $b;
                $adapter->increment("ganesha_service$s" . "_failure");
                $adapter->increment("ganesha_service$s" . "_success");
            }
        }' "$PWD" "$2" "$3"
}

# Runs three syncs of host $2 on segment $1: the first publishes everything, the next two find
# nothing changed. Prints the sidecar's report lines.
syncs() {
    "$sidecar" --segment "$1" --redis "redis://127.0.0.1:$port" --fleet bench --host "$2" --interval-ms 200 \
        --syncs 3 2>>"$work/sidecar.log"
}

echo "Fleet sidecar: one sync of a host, with a second host's services in Redis too"
echo
echo "| services a host | sync | round trips | published | services read | written | time | CPU |"
echo "|---|---|---|---|---|---|---|---|"
for services in ${SERVICES:-1 100 10000}; do
    cli flushall >/dev/null
    rm -f "$work"/*.segment
    fill "$work/a.segment" "$services" 1
    fill "$work/b.segment" "$services" 1
    syncs "$work/b.segment" b >/dev/null
    syncs "$work/a.segment" a | sed -E 's/^sync ([0-9]+): ([0-9]+) round trips, ([0-9]+) published, [0-9]+ republished, ([0-9]+) services, [0-9]+ hosts, ([0-9]+) written, ([0-9.]+) ms, ([0-9.]+) ms of CPU$/| '"$services"' | \1 | \2 | \3 | \4 | \5 | \6 ms | \7 ms |/'
done

echo
echo "Redis's memory per service and host (MEMORY USAGE of the service's hash, 1,000 services, 2 hosts)"
echo
echo "| events of a counter in | bytes per service and host |"
echo "|---|---|"
for buckets in 1 60; do
    cli flushall >/dev/null
    rm -f "$work"/*.segment
    fill "$work/a.segment" 1000 "$buckets"
    fill "$work/b.segment" 1000 "$buckets"
    syncs "$work/a.segment" a >/dev/null
    syncs "$work/b.segment" b >/dev/null
    total=0
    while read -r key; do
        total=$((total + $(cli memory usage "$key" samples 0)))
    done < <(cli --scan --pattern 'ganesha-shm:{bench:*')
    index=$(cli memory usage ganesha-shm:bench:services samples 0)
    printf '| %s bucket(s) | %d (the index: %d more per service) |\n' "$buckets" $((total / 2000)) $((index / 1000))
done
