#!/usr/bin/env bash
# The adapters behind a real web stack on loopback: Debian's nginx in front of Debian's
# php-fpm (pm=static, one worker per CPU, opcache as Debian enables it), Debian's wrk as the
# load, and a private redis-server for Ganesha's Redis adapter. Every request builds Ganesha and
# makes one isAvailable() and one success() on one service (benches/web/index.php).
#
#   bash benches/web.sh [--rounds N] [--duration S] [--concurrency "8 64 256"]
#       Rounds of every endpoint at every concurrency, interleaved: plain PHP, Ganesha over the
#       do-nothing adapter, SlidingTimeWindowShm, SlidingTimeWindowShm in fleet mode (a second
#       php-fpm master on a segment file with ganesha_shm.fleet=1, and the sidecar syncing it
#       every second with the redis-server), Ganesha's Apcu and Redis adapters, each on one
#       service and on 1,000 services. Prints req/s, p50/p99/p99.9 latency, errors, each
#       adapter's ratio to the do-nothing adapter, and fleet mode's to local shm (medians over
#       rounds of per-round ratios). Its chart: bash benches/web.sh | tee web.txt, then
#       php benches/chart.php web.txt web.svg (bars of each adapter's req/s ratio).
#   bash benches/web.sh --chaos [--duration S]
#       The chaos soak (60 s by default): wrk at 64 connections on one service, while a random
#       worker is SIGKILLed every 200 ms and the master, on a segment file (ganesha_shm.path),
#       is reloaded (SIGUSR2) every 5 s. Prints a ledger and exits non-zero unless the store's
#       count equals the responses that say they counted, within the requests that were under
#       way in killed or reloaded workers.
#
# On Debian as root it installs what is missing with apt-get. Ganesha comes from vendor/ or
# GANESHA_DIR, as for the tests. Every process is started with its own configuration in a
# temporary directory and stopped by pid whatever happens. GANESHA_SHM_EXT names a built
# extension to use instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

mode=bench rounds=3 duration= concurrency="8 64 256"
while (($#)); do
    case "$1" in
        --chaos) mode=chaos ;;
        --rounds) rounds=$2; shift ;;
        --duration) duration=$2; shift ;;
        --concurrency) concurrency=$2; shift ;;
        -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "web: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$mode" = chaos ]; then duration=${duration:-60}; else duration=${duration:-5}; fi
[[ "$duration" =~ ^[0-9]+$ && "$duration" -ge 1 ]] || { echo "web: --duration takes whole seconds" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9]+$ && "$rounds" -ge 1 ]] || { echo "web: --rounds takes a whole number" >&2; exit 2; }

say() { printf 'web: %s\n' "$*"; }

# What it runs, from Debian's packages; the Apcu and Redis peers only for the benchmark.
php_version=$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
packages=(nginx wrk curl "php$php_version-fpm")
[ "$mode" = bench ] && packages+=(redis-server php-apcu php-redis)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
fpm=$(command -v "php-fpm$php_version" || echo "/usr/sbin/php-fpm$php_version")
nginx=$(command -v nginx || echo /usr/sbin/nginx)

if [ -z "${GANESHA_SHM_EXT:-}" ]; then
    . .ci/install-deps
    cargo build --release --quiet
    GANESHA_SHM_EXT=${CARGO_TARGET_DIR:-$repo/target}/release/libganesha_shm.so
fi
# The fleet sidecar built beside the extension (GANESHA_SHM_FLEET names another).
fleet_sidecar=${GANESHA_SHM_FLEET:-$(dirname "$GANESHA_SHM_EXT")/ganesha-shm-fleet}
if [ ! -f vendor/autoload.php ] && [ -z "${GANESHA_DIR:-}" ]; then
    echo "web: Ganesha is not installed: run \`composer install\`, or set GANESHA_DIR to an exported ackintosh/ganesha" >&2
    exit 1
fi

work=$(mktemp -d /tmp/ganesha-shm-web.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    # php-fpm workers whose master was killed, and anything else started with this directory
    pkill -KILL -f "$work" 2>/dev/null || true
    [ -n "${WEB_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { php -r '$s = stream_socket_server("tcp://127.0.0.1:0"); echo substr(strrchr(stream_socket_get_name($s, false), ":"), 1);'; }
# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.1 s; fails the run after SECONDS.
wait_for() {
    local what=$1 deadline=$(($(date +%s) + $2))
    shift 2
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            say "$what did not come up; logs:"
            tail -n 20 "$work"/*.log >&2 || true
            exit 1
        fi
        sleep 0.1
    done
}

workers=$(nproc)
[ "$mode" = chaos ] && workers=$((2 * $(nproc) > 4 ? 2 * $(nproc) : 4))
web_port=$(free_port)
redis_port=
if [ "$mode" = bench ]; then
    redis_port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --dir "$work" \
        --daemonize no --logfile "$work/redis.log" >/dev/null 2>&1 &
    pids+=($!)
    wait_for redis-server 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$redis_port"
fi

segment_setting=()
[ "$mode" = chaos ] && segment_setting=(-d "ganesha_shm.path=$work/segment")
cat >"$work/php-fpm.conf" <<EOF
[global]
pid = $work/php-fpm.pid
error_log = $work/php-fpm.log
log_level = warning
process_control_timeout = 2s

[web]
listen = $work/php-fpm.sock
listen.mode = 0666
listen.backlog = 4096
pm = static
pm.max_children = $workers
request_terminate_timeout = 30s
catch_workers_output = yes
EOF
# php-fpm clears its workers' environment but for what the pool passes.
[ -n "${GANESHA_DIR:-}" ] && echo "env[GANESHA_DIR] = $GANESHA_DIR" >>"$work/php-fpm.conf"
[ -n "$redis_port" ] && echo "env[BENCH_REDIS_PORT] = $redis_port" >>"$work/php-fpm.conf"
# Debian's php.ini and conf.d for php-fpm (opcache, apcu, redis), plus the extension.
as_root=()
[ "$(id -u)" = 0 ] && as_root=(-R)
"$fpm" -F "${as_root[@]}" -y "$work/php-fpm.conf" -d "extension=$GANESHA_SHM_EXT" "${segment_setting[@]}" \
    >"$work/php-fpm.out.log" 2>&1 &
fpm_pid=$!
pids+=("$fpm_pid")
wait_for php-fpm 15 test -S "$work/php-fpm.sock"

# Fleet mode: a second master, on a segment file in fleet mode, and its sidecar.
if [ "$mode" = bench ]; then
    [ -x "$fleet_sidecar" ] || { say "no fleet sidecar at $fleet_sidecar (cargo build --release builds it)"; exit 1; }
    sed -e "s#$work/php-fpm.pid#$work/php-fpm-fleet.pid#" -e "s#$work/php-fpm.log#$work/php-fpm-fleet.log#" \
        -e "s#$work/php-fpm.sock#$work/php-fpm-fleet.sock#" -e 's#^\[web\]#[fleet]#' "$work/php-fpm.conf" >"$work/php-fpm-fleet.conf"
    "$fpm" -F "${as_root[@]}" -y "$work/php-fpm-fleet.conf" -d "extension=$GANESHA_SHM_EXT" \
        -d "ganesha_shm.path=$work/fleet.segment" -d ganesha_shm.fleet=1 >"$work/php-fpm-fleet.out.log" 2>&1 &
    pids+=($!)
    wait_for "php-fpm (fleet mode)" 15 test -S "$work/php-fpm-fleet.sock"
    "$fleet_sidecar" --segment "$work/fleet.segment" --redis "redis://127.0.0.1:$redis_port" --fleet web --host bench \
        2>"$work/fleet.log" &
    pids+=($!)
fi

cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
$([ "$(id -u)" = 0 ] && echo 'user root;')
pid $work/nginx.pid;
error_log $work/nginx.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx-body;
    fastcgi_temp_path $work/nginx-fastcgi;
    proxy_temp_path $work/nginx-proxy;
    uwsgi_temp_path $work/nginx-uwsgi;
    scgi_temp_path $work/nginx-scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$web_port backlog=4096;
        location = /index.php {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $repo/benches/web/index.php;
            fastcgi_pass unix:$work/php-fpm.sock;
        }
        location = /fleet/index.php {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $repo/benches/web/index.php;
            fastcgi_pass unix:$work/php-fpm-fleet.sock;
        }
    }
}
EOF
"$nginx" -c "$work/nginx.conf" -e "$work/nginx.log" >"$work/nginx.out.log" 2>&1 &
pids+=($!)
url="http://127.0.0.1:$web_port/index.php"
wait_for nginx 15 curl -sf "$url?adapter=plain"
for adapter in null shm; do
    body=$(curl -s "$url?adapter=$adapter")
    [ "$body" = counted ] || { say "the $adapter endpoint answers: $body"; exit 1; }
done
fleet_url="http://127.0.0.1:$web_port/fleet/index.php"
if [ "$mode" = bench ]; then
    body=$(curl -s "$fleet_url?adapter=shm")
    [ "$body" = counted ] || { say "the fleet endpoint answers: $body"; exit 1; }
    wait_for "the fleet sidecar's first sync" 15 grep -q 'connected to' "$work/fleet.log"
fi
say "nginx on 127.0.0.1:$web_port, php-fpm $("$fpm" -v | head -n 1 | cut -d' ' -f2) with $workers workers (pm=static), $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)"
# When and on what it ran, for whoever reads the output later (benches/chart.php shows it).
cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
say "run of $(date -u '+%Y-%m-%d %H:%M UTC'): ${cpu:+$cpu, }$(nproc) CPUs, Linux $(uname -r)"

# run_wrk CONNECTIONS SECONDS QUERY [URL]: one wrk run; prints its WRK line.
run_wrk() {
    local out
    out=$(timeout $(($2 + 30)) wrk -t1 -c"$1" -d"$2"s --timeout 10s --latency -s "$repo/benches/web/wrk.lua" "${4:-$url}?$3" 2>&1) || {
        say "wrk failed or hung: $out"
        return 1
    }
    grep '^WRK ' <<<"$out"
}
field() { sed -nE "s/.* $1=([0-9]+).*/\1/p" <<<"$2"; }

if [ "$mode" = bench ]; then
    endpoints=(plain null shm fleet apcu redis)
    results=$work/results.tsv
    : >"$results"
    # The fleet endpoint is SlidingTimeWindowShm, served by the master in fleet mode.
    query() { if [ "$1" = fleet ]; then echo "adapter=shm$2"; else echo "adapter=$1$2"; fi; }
    endpoint_url() { if [ "$1" = fleet ]; then echo "$fleet_url"; else echo "$url"; fi; }
    for endpoint in "${endpoints[@]}"; do run_wrk 8 1 "$(query "$endpoint" "")" "$(endpoint_url "$endpoint")" >/dev/null; done   # warm-up
    for round in $(seq "$rounds"); do
        for services in 1 1000; do
            for connections in $concurrency; do
                for endpoint in "${endpoints[@]}"; do
                    line=$(run_wrk "$connections" "$duration" "$(query "$endpoint" "&services=$services")" "$(endpoint_url "$endpoint")")
                    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$services" "$connections" "$endpoint" "$line" >>"$results"
                done
            done
        done
        say "round $round of $rounds done"
    done
    php "$repo/benches/web/report.php" "$results" "$workers" "$duration"
    say "the fleet sidecar: $(grep -c 'lost\|cannot' "$work/fleet.log" || true) sync failures; $(tail -n 1 "$work/fleet.log")"
    exit 0
fi

# The chaos soak.
connections=64
say "chaos: ${duration} s of wrk at $connections connections on one service; a worker SIGKILLed every 200 ms, a reload every 5 s"
# The sanity checks above counted too: the ledger counts from here.
before=$(curl -sf "$url?adapter=shm&read=1")
WRK_LEDGER=1 run_wrk "$connections" "$duration" "adapter=shm" >"$work/wrk.out" &
wrk_pid=$!
pids+=("$wrk_pid")
# On a schedule of its own, so that the time it takes to pick a victim does not slow it.
now_us() { echo $((${EPOCHREALTIME/./})); }
kills=0 reloads=0
next_kill=$(($(now_us) + 200000)) next_reload=$(($(now_us) + 5000000))
while kill -0 "$wrk_pid" 2>/dev/null; do
    wait_us=$((next_kill - $(now_us)))
    ((wait_us > 0)) && sleep "$(printf '0.%06d' "$wait_us")"
    next_kill=$((next_kill + 200000))
    victim=$(pgrep -P "$fpm_pid" | shuf -n 1 || true)
    if [ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null; then
        kills=$((kills + 1))
    fi
    if (($(now_us) >= next_reload)); then
        next_reload=$((next_reload + 5000000))
        kill -USR2 "$fpm_pid" 2>/dev/null && reloads=$((reloads + 1))
    fi
done
hung=no
wait "$wrk_pid" || hung=yes
line=$(cat "$work/wrk.out")
sleep 1
wait_for "php-fpm after the soak" 15 curl -sf "$url?adapter=plain"
stored=$(timeout 10 curl -sf "$url?adapter=shm&read=1" || echo unanswered)
[[ "$stored" =~ ^[0-9]+$ ]] && stored=$((stored - before))

sent=$(field sent "$line")
responses=$(field requests "$line")
counted=$(field counted "$line")
non2xx=$(field non2xx "$line")
socket_errors=$(($(field connect "$line") + $(field read "$line") + $(field write "$line") + $(field timeout "$line")))
# Requests that did not answer "counted": a 502 or a cut connection when their worker was killed
# or reloaded, or a 200 without the word.
errors=$((responses - counted + socket_errors))
# Requests sent that neither answered nor failed: under way when wrk stopped (about one per
# connection, and a few wrk sent again on a new connection); the server may have counted them.
unfinished=$((sent - responses - socket_errors))
in_killed=$((kills + reloads * workers))
bound=$((errors + unfinished))
cleanup
trap - EXIT
left=$(pgrep -f "$work" | wc -l || true)

ok=yes
check() { # description, condition
    if eval "$2"; then printf '  ok    %s\n' "$1"; else printf '  FAIL  %s\n' "$1"; ok=no; fi
}
extra=$([[ "$stored" =~ ^[0-9]+$ ]] && echo $((stored - counted)) || echo "?")
cat <<EOF
web: chaos ledger ($duration s, $connections connections, $workers workers, segment file)
  workers SIGKILLed                  $kills
  master reloads (SIGUSR2)           $reloads
  requests sent                      $sent
  answered                           $responses
  answered "counted"                 $counted
  errors (non-2xx $non2xx, socket $socket_errors)    $errors
  under way when wrk stopped         $unfinished
  the store's count                  $stored
  store - counted                    $extra, bound: errors + under way at the end = $bound
EOF
check "wrk finished: no hang" '[ "$hung" = no ] && [ -n "$responses" ]'
check "the store answered" '[[ "$stored" =~ ^[0-9]+$ ]]'
check "nothing counted is lost: store $stored >= counted $counted" '[[ "$stored" =~ ^[0-9]+$ ]] && ((stored >= counted))'
check "the store holds no more than was sent: store - counted $extra <= $bound" '[[ "$stored" =~ ^[0-9]+$ ]] && ((stored - counted <= bound))'
check "every error is explained by a killed or reloaded worker: errors $errors <= $in_killed ($kills kills + $reloads reloads x $workers workers)" '((errors <= in_killed))'
check "every process gone ($left left)" '((left == 0))'
echo "web: chaos $([ "$ok" = yes ] && echo passed || echo FAILED)"
[ "$ok" = yes ]
