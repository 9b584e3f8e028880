#!/usr/bin/env bash
# The Debian package as a server runs it, inside a Debian root where Debian's php-fpm is installed
# (run by `bash tests/matrix.sh deb`, which builds the package with packaging/deb.sh first):
#
#   bash tests/deb.sh PACKAGE.deb
#
# 1. dpkg -i installs it: every file of dpkg -L exists, phpenmod linked the ini into the cli and
#    fpm conf.d, and `php --ri ganesha_shm` (no -d, no -n) shows it with the package's version;
# 2. php-fpm is started as Debian's service unit starts it (its ExecStart, with the php-fpm.conf
#    and pool www.conf the package ships, untouched: the pool listens on its unix socket), with no
#    -d extension: phpinfo() lists the extension, and a counter incremented by requests served by
#    several workers (two held at a barrier at once, then 4 clients x 20 requests) is exact;
# 3. dpkg -r disables it (no conf.d link, php -m without it, the conf file kept), dpkg -P purges
#    it: no file of dpkg -L is left and /etc, /usr and /var/lib/php hold exactly the files they held
#    before the install; php-fpm starts again, without the extension.
#
# php-fpm is stopped by its pid (SIGTERM, then SIGKILL after 5 s, its workers too) however the
# script ends. While it runs, /usr/sbin/policy-rc.d denies service starts (as in Debian's chroots
# and containers): the package's conf.d links trigger `invoke-rc.d php<ver>-fpm restart`, which
# would start a php-fpm of its own in this root, where no init system runs.
set -euo pipefail

deb=${1:?usage: bash tests/deb.sh PACKAGE.deb}
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'deb test: %s\n' "$*"; }
fail() { printf 'deb test: FAILED: %s\n' "$*" >&2; exit 1; }

package=$(dpkg-deb -f "$deb" Package)
version=$(dpkg-deb -f "$deb" Version)
ver=${package#php}
ver=${ver%-ganesha-shm}
fpm=/usr/sbin/php-fpm$ver
unit=/usr/lib/systemd/system/php$ver-fpm.service
socket=/run/php/php$ver-fpm.sock
[ -x "$fpm" ] || fail "$fpm is not installed (apt-get install php$ver-fpm)"
[ -f "$unit" ] || fail "no service unit $unit"
command -v cgi-fcgi >/dev/null || fail "cgi-fcgi is not installed (apt-get install libfcgi-bin)"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ -n "$exec_start" ] || fail "no ExecStart in $unit"
case " $exec_start " in *" -d "*|*" -n "*|*extension*) fail "$unit passes settings itself: $exec_start" ;; esac

work=$(mktemp -d /tmp/ganesha-shm-deb.XXXXXX)
chmod 0755 "$work"
fpm_pid=
created_policy=
stop_fpm() {
    [ -n "$fpm_pid" ] || return 0
    local workers i
    workers=$(ps -o pid= --ppid "$fpm_pid" 2>/dev/null || true)
    kill -TERM "$fpm_pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$fpm_pid" 2>/dev/null || break
        sleep 0.1
    done
    for pid in $fpm_pid $workers; do
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    done
    wait "$fpm_pid" 2>/dev/null || true
    fpm_pid=
}
cleanup() {
    stop_fpm
    [ -n "$created_policy" ] && rm -f /usr/sbin/policy-rc.d
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# written by ganesha-shm tests/deb.sh while it runs\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    created_policy=yes
fi
if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -qv 'not-installed'; then
    say "$package is on this root from an earlier run: purging it first"
    dpkg -P "$package" >/dev/null
fi

# Every file below the directories the package touches, before it is installed.
snapshot() { find /etc /usr /var/lib/php -xdev \( -type f -o -type l -o -type d \) 2>/dev/null | sort; }
snapshot >"$work/before"

# A GET request to the pool through its socket; the answer's body, or the failure.
request() {
    local script=$1 query=${2:-} answer
    answer=$(env -i REQUEST_METHOD=GET SCRIPT_FILENAME="$script" SCRIPT_NAME="/${script##*/}" \
        QUERY_STRING="$query" REQUEST_URI="/${script##*/}?$query" SERVER_PROTOCOL=HTTP/1.1 \
        GATEWAY_INTERFACE=CGI/1.1 REMOTE_ADDR=127.0.0.1 SERVER_NAME=localhost SERVER_PORT=80 \
        timeout 30 cgi-fcgi -bind -connect "$socket" 2>&1) || { echo "cgi-fcgi failed: $answer"; return 1; }
    case $answer in
        Status:*) echo "$answer"; return 1 ;;
    esac
    printf '%s' "$answer" | sed '1,/^\r\{0,1\}$/d'
}

# php-fpm as its service unit starts it (RuntimeDirectory=php: systemd makes /run/php).
start_fpm() {
    local i
    mkdir -p /run/php
    rm -f "$socket"
    say "starting php-fpm as $unit does: $exec_start"
    $exec_start >"$work/fpm.out" 2>&1 &
    fpm_pid=$!
    for ((i = 0; i < 100; i++)); do
        kill -0 "$fpm_pid" 2>/dev/null || fail "php-fpm exited: $(cat "$work/fpm.out"; tail -n 5 "/var/log/php$ver-fpm.log")"
        if [ -S "$socket" ] && request "$work/phpinfo.php" >/dev/null 2>&1; then
            say "php-fpm $fpm_pid serves $socket, workers $(ps -o pid= --ppid "$fpm_pid" | xargs)"
            return
        fi
        sleep 0.1
    done
    fail "php-fpm did not answer on $socket within 10 s: $(cat "$work/fpm.out")"
}

printf '<?php phpinfo(INFO_MODULES);\n' >"$work/phpinfo.php"
chmod 0644 "$work/phpinfo.php"
native=$repo/tests/Fpm/www/native.php

# 1. install
say "dpkg -i $deb"
dpkg -i "$deb"
dpkg -L "$package" >"$work/files"
while read -r file; do
    [ -e "$file" ] || fail "dpkg -L lists $file, which is not there"
done <"$work/files"
ini=/etc/php/$ver/mods-available/ganesha_shm.ini
for sapi in cli fpm; do
    link=/etc/php/$ver/$sapi/conf.d/20-ganesha_shm.ini
    [ "$(readlink "$link")" = "$ini" ] || fail "$link is not a link to $ini (phpenmod)"
done
grep -qx 'extension=ganesha_shm.so' "$ini" || fail "$ini does not load the extension"
ri=$(php --ri ganesha_shm) || fail "php --ri ganesha_shm failed"
grep -qx "Version => $version" <<<"$ri" || fail "php --ri ganesha_shm does not show version $version: $ri"
say "php --ri ganesha_shm, from conf.d: $(grep -x "ganesha_shm support => enabled" <<<"$ri"), $(grep -x "Version => .*" <<<"$ri")"

# 2. php-fpm from Debian's own configuration
start_fpm
info=$(request "$work/phpinfo.php") || fail "phpinfo: $info"
grep -q 'name="module_ganesha_shm"' <<<"$info" || fail "phpinfo() of php-fpm does not list ganesha_shm"
grep -q "Version </td><td class=\"v\">$version <" <<<"$info" || fail "phpinfo() of php-fpm does not show version $version"
say "phpinfo() of php-fpm lists ganesha_shm $version"

key=deb-$$-$RANDOM
barrier=$work/barrier
mkdir -m 0777 "$barrier"
pair=()
for i in 1 2; do
    request "$native" "op=increment&key=$key&times=5&barrier=$barrier&parties=2" >"$work/pair$i" &
    pair+=($!)
done
for pid in "${pair[@]}"; do wait "$pid" || fail "a request at the barrier failed: $(cat "$work"/pair*)"; done
clients=()
for c in 1 2 3 4; do
    (
        for ((r = 0; r < 20; r++)); do
            request "$native" "op=increment&key=$key&times=5" || exit 1
            echo
        done
    ) >"$work/client$c" &
    clients+=($!)
done
for pid in "${clients[@]}"; do wait "$pid" || fail "a client's request failed: $(cat "$work"/client*)"; done
expected=$((2 * 5 + 4 * 20 * 5))
load=$(request "$native" "op=load&keys%5B%5D=$key") || fail "load: $load"
count=$(php -r '$a = json_decode(stream_get_contents(STDIN), true); echo $a["counts"][$argv[1]] ?? "none";' "$key" <<<"$load")
workers=$(cat "$work"/pair* "$work"/client* | grep -o '"pid":[0-9]*' | sort -u | wc -l)
pair_workers=$(cat "$work"/pair* | grep -o '"pid":[0-9]*' | sort -u | wc -l)
[ "$pair_workers" -eq 2 ] || fail "the two requests at the barrier were not served by two workers"
[ "$count" = "$expected" ] || fail "the counter is $count after $expected increments by $workers workers"
say "counter exact: $count increments from $((2 + 4 * 20)) requests served by $workers workers"
stop_fpm

# 3. removal, then purge
say "dpkg -r $package"
dpkg -r "$package"
for sapi in cli fpm; do
    [ ! -e "/etc/php/$ver/$sapi/conf.d/20-ganesha_shm.ini" ] && [ ! -L "/etc/php/$ver/$sapi/conf.d/20-ganesha_shm.ini" ] ||
        fail "dpkg -r left the $sapi conf.d link"
done
if php -m | grep -qx ganesha_shm; then fail "php -m still lists ganesha_shm after dpkg -r"; fi
[ -f "$ini" ] || fail "dpkg -r removed the conf file (it is kept until purge)"
say "dpkg -P $package"
dpkg -P "$package"
while read -r file; do
    # the directories it shares with other packages (/., /etc, /usr/lib/php/<api>) stay
    [ "$file" = /. ] && continue
    [ -d "$file" ] && grep -Fxq "$file" "$work/before" && continue
    [ ! -e "$file" ] && [ ! -L "$file" ] || fail "dpkg -P left $file"
done <"$work/files"
snapshot >"$work/after"
diff -u "$work/before" "$work/after" >"$work/diff" || fail "the files below /etc, /usr and /var/lib/php differ from before the install:
$(cat "$work/diff")"
say "purged: none of the $(wc -l <"$work/files") paths of dpkg -L is left, /etc, /usr and /var/lib/php are as before"

start_fpm
info=$(request "$work/phpinfo.php") || fail "phpinfo after purge: $info"
if grep -q 'module_ganesha_shm' <<<"$info"; then fail "php-fpm still loads ganesha_shm after the purge"; fi
if grep -qi 'ganesha' "$work/fpm.out"; then fail "php-fpm mentions ganesha_shm at startup: $(cat "$work/fpm.out")"; fi
stop_fpm
say "php-fpm starts again without the extension"
say "passed"
