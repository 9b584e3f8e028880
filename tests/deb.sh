#!/usr/bin/env bash
# The Debian package as a server runs it, inside a Debian root where Debian's php-fpm, apache2
# and mod_php (libapache2-mod-php<ver>) are installed (run by `bash tests/matrix.sh deb`, which
# builds the package with packaging/deb.sh first):
#
#   bash tests/deb.sh PACKAGE.deb
#
# 1. dpkg -i installs it: every file of dpkg -L exists, phpenmod linked the ini into the cli, fpm
#    and apache2 conf.d, its tmpfiles.d entry makes /run/ganesha-shm, which only root may write,
#    and `php --ri ganesha_shm` (no -d, no -n) shows it with the package's version;
# 2. php-fpm is started as Debian's service unit starts it (its ExecStart, with the php-fpm.conf
#    and pool www.conf the package ships, untouched: the pool listens on its unix socket), with no
#    -d extension: phpinfo() lists the extension, and a counter incremented by requests served by
#    several workers (two held at a barrier at once, then 4 clients x 20 requests) is exact;
# 3. Apache with mod_php is started as apachectl starts it (`apache2ctl -DFOREGROUND`: Debian's
#    envvars and /etc/apache2 as the packages ship them, the prefork MPM, the php.ini and conf.d
#    of the apache2 SAPI), in a network namespace of its own: a script put in Debian's
#    DocumentRoot (/var/www/html), requested over HTTP on 127.0.0.1:80, is served by a child with
#    the extension loaded from conf.d, of the package's version, with its anonymous segment; and
#    the counter of step 2, incremented in the same way by requests Apache's children serve, is
#    exact;
# 4. dpkg -r disables it (no conf.d link, php -m without it, the conf file kept), dpkg -P purges
#    it: no file of dpkg -L is left and /etc, /usr and /var/lib/php hold exactly the files they held
#    before the install; php-fpm and Apache start again, without the extension;
# 5. mod_php installed after the package: libapache2-mod-php<ver> (and the libapache2-mod-php
#    metapackage) removed with dpkg -r, the package installed (enabled for cli and fpm only), then
#    mod_php installed again with dpkg -i from apt's cache (/var/cache/apt/archives: offline). Its
#    postinst enables every module phpenmod registered, so the apache2 conf.d link appears and
#    Apache loads the extension; dpkg -P removes that link too, and /etc, /usr and /var/lib/php
#    are again as they were before the first install. mod_php is installed again however it ends.
# 6. with FLEET.deb, the fleet sidecar's package: dpkg -i installs /usr/bin/ganesha-shm-fleet, of
#    the package's version, its systemd unit, not enabled, its man page ganesha-shm-fleet(8),
#    with every flag --help gives, and /etc/ganesha-shm/fleet.conf, a
#    conffile with which the sidecar refuses to start (exit 2) until it is configured; dpkg -P
#    leaves nothing of it, /etc/ganesha-shm included.
#
# php-fpm and Apache are stopped by their pids (SIGTERM, then SIGKILL after 5 s, their workers and
# children too) however the script ends. While it runs, /usr/sbin/policy-rc.d denies service
# starts (as in Debian's chroots and containers): the package's conf.d links trigger
# `invoke-rc.d php<ver>-fpm restart` and, through mod_php's trigger, `invoke-rc.d apache2
# restart`, which would start servers of their own in this root, where no init system runs.
set -euo pipefail

deb=${1:?usage: bash tests/deb.sh PACKAGE.deb [FLEET.deb]}
fleet_deb=${2:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'deb test: %s\n' "$*"; }
fail() { printf 'deb test: FAILED: %s\n' "$*" >&2; exit 1; }
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

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

# Apache and the mod_php of this PHP, as Debian ships them, and what runs Apache in a network
# namespace of its own (util-linux's setsid, unshare and nsenter; iproute2's ip).
modphp=libapache2-mod-php$ver
[ -x /usr/sbin/apache2ctl ] && [ -x /usr/sbin/apache2 ] || fail "apache2 is not installed (apt-get install apache2)"
installed "$modphp" ||
    fail "$modphp is not installed in this root (apt-get install apache2 $modphp; tests/matrix.sh installs both in its root: root_packages)"
[ -e "/usr/lib/php/$ver/sapi/apache2" ] || fail "$modphp did not register the apache2 SAPI (/usr/lib/php/$ver/sapi/apache2)"
for tool in setsid unshare nsenter ip; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (util-linux; ip: iproute2)"
done
envvars=/etc/apache2/envvars
[ -f "$envvars" ] || fail "no $envvars (apache2)"
# (envvars reads variables apache2ctl may have set: sourced without set -u)
apache_pidfile=$(set +u && . "$envvars" && echo "$APACHE_PID_FILE")
apache_log=$(set +u && . "$envvars" && echo "$APACHE_LOG_DIR")/error.log
if [ -s "$apache_pidfile" ] && [ "$(ps -o comm= -p "$(cat "$apache_pidfile")" 2>/dev/null)" = apache2 ]; then
    fail "an apache2 runs already (pid $(cat "$apache_pidfile"), $apache_pidfile): stop it first"
fi
docroot=/var/www/html
[ -d "$docroot" ] || fail "no $docroot, the DocumentRoot of Debian's default site"
web=$docroot/ganesha-shm-deb-test.php
# mod_php's packages, as installed, from apt's cache: step 5 removes them and installs them again
modphp_packages=("$modphp")
if installed libapache2-mod-php; then modphp_packages=(libapache2-mod-php "$modphp"); fi
modphp_debs=()
for pkg in "${modphp_packages[@]}"; do
    want=$(dpkg-query -W -f='${Version}' "$pkg")
    found=
    for candidate in /var/cache/apt/archives/"$pkg"_*.deb; do
        [ -f "$candidate" ] || continue
        if [ "$(dpkg-deb -f "$candidate" Package)" = "$pkg" ] && [ "$(dpkg-deb -f "$candidate" Version)" = "$want" ]; then
            found=$candidate
            break
        fi
    done
    [ -n "$found" ] ||
        fail "no $pkg $want in /var/cache/apt/archives, which step 5 installs again after removing it (apt-get install --reinstall --download-only $pkg=$want)"
    modphp_debs+=("$found")
done

work=$(mktemp -d /tmp/ganesha-shm-deb.XXXXXX)
chmod 0755 "$work"
fpm_pid=
apache_wrapper=
apache_pid=
apache_log_offset=0
created_policy=
web_written=
modphp_removed=
# alive PID: the process runs (and is not a zombie its parent has not reaped yet)
alive() {
    local stat
    stat=$(ps -o stat= -p "$1" 2>/dev/null) && [[ -n $stat && $stat != *Z* ]]
}
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
# The Apache parent: the apache2 of the process group of apache2ctl's shell (setsid made that
# shell, $apache_wrapper, the leader of a session and process group of its own, which Apache's
# processes keep) whose parent is no apache2 of that group; nothing while it has not started.
apache_parent() {
    ps -e -o pid=,ppid=,pgid=,comm= | awk -v group="$apache_wrapper" '
        $3 == group && $4 == "apache2" { parent[$1] = $2 }
        END { for (pid in parent) if (!(parent[pid] in parent)) { print pid; exit } }'
}
# SIGTERM to the Apache parent, which stops its children (and signals its process group,
# apache2ctl's shell included: the parent, orphaned, is then reaped by init); after 5 s, SIGKILL
# to whatever is left of that process group: the parent, its children, apache2ctl's shell.
stop_apache() {
    [ -n "$apache_wrapper" ] || return 0
    local target i
    [ -n "$apache_pid" ] || apache_pid=$(apache_parent)
    target=${apache_pid:-$apache_wrapper}
    kill -TERM "$target" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        alive "$target" || break
        sleep 0.1
    done
    # (apache2ctl's shell is not reaped before this: the group's id is not reused meanwhile)
    kill -KILL -- "-$apache_wrapper" 2>/dev/null || true
    wait "$apache_wrapper" 2>/dev/null || true
    apache_wrapper=
    apache_pid=
}
cleanup() {
    stop_fpm
    stop_apache
    if [ -n "$web_written" ]; then rm -f "$web"; fi
    if [ -n "$modphp_removed" ]; then
        say "installing ${modphp_packages[*]} again"
        dpkg -i "${modphp_debs[@]}" >"$work/dpkg-modphp.out" 2>&1 ||
            printf 'deb test: could not install %s again: %s\n' "${modphp_packages[*]}" "$(cat "$work/dpkg-modphp.out")" >&2
    fi
    if [ -n "$created_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
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

# Every file below the directories the package touches, before it is installed. (Apache writes
# its pid file, lock directory and logs below /run/apache2, /run/lock/apache2 and
# /var/log/apache2, none of them in these.)
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

# GET http://127.0.0.1/<the script $web>?QUERY, in Apache's network namespace, with PHP's own
# HTTP stream ($work/get.php: the root has no curl); the body of a 200, or the failure.
http_get() {
    nsenter --net="/proc/$apache_pid/ns/net" php -n "$work/get.php" "http://127.0.0.1/${web##*/}?${1:-}"
}
# What Apache said since start_apache: its output, and the end of what its error log got.
apache_logs() {
    cat "$work/apache.out"
    tail -c +"$((apache_log_offset + 1))" "$apache_log" 2>/dev/null | tail -n 20
}

# Apache as Debian starts it. The unit's ExecStart is `apachectl start`, which sources envvars,
# makes the run and lock directories and runs `apache2 -k start`, which daemonizes;
# `apache2ctl -DFOREGROUND` does the same but runs apache2 in the foreground, as a child of
# apache2ctl's shell, so its pid is known without a pid file (the pid file is checked against
# it). It runs in a session of its own (the parent signals its process group when it stops).
# It reads Debian's /etc/apache2 as the packages ship it, so it listens on port 80 of every
# address (ports.conf: Listen 80). Overriding that would not do: -C "Listen 127.0.0.1:PORT" adds
# a listener and leaves ports.conf's, and changing ports.conf is editing the configuration. So it
# runs in a network namespace of its own (unshare --net, with only its loopback, brought up): a
# chroot shares the host's network, where port 80 may be taken (by the host's apache2 or nginx,
# or a test) and where Listen 80 accepts connections from other hosts; in the namespace port 80
# is free and reachable from nothing outside it, and http_get enters it (nsenter) to connect to
# 127.0.0.1.
start_apache() {
    local i
    apache_log_offset=$(stat -c %s "$apache_log" 2>/dev/null || echo 0)
    say "starting apache2 as apachectl does, in the foreground (apache2ctl -DFOREGROUND), in a network namespace of its own"
    setsid unshare --net sh -c 'ip link set lo up && exec apache2ctl -DFOREGROUND' \
        </dev/null >"$work/apache.out" 2>&1 &
    apache_wrapper=$!
    for ((i = 0; i < 150; i++)); do
        alive "$apache_wrapper" || fail "apache2 exited: $(apache_logs)"
        [ -n "$apache_pid" ] || apache_pid=$(apache_parent)
        if [ -n "$apache_pid" ] && [ "$(cat "$apache_pidfile" 2>/dev/null)" = "$apache_pid" ] &&
            http_get >/dev/null 2>&1; then
            [ "$(readlink "/proc/$apache_pid/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
                fail "apache2 $apache_pid runs in the network namespace of this root"
            say "apache2 $apache_pid ($apache_pidfile) serves http://127.0.0.1:80/ in its network namespace, children $(ps -o pid= --ppid "$apache_pid" | xargs)"
            return
        fi
        sleep 0.1
    done
    fail "apache2 did not answer on 127.0.0.1:80 within 15 s: $(apache_logs)"
}

# check_counter NAME NOUN GET...: `GET... QUERY` sends a request to the adapter's script
# (tests/Fpm/www/native.php). Requests increment a counter, 5 times each: two held at a barrier
# at once (so served by two processes), then 4 clients x 20 requests; one more loads it.
check_counter() {
    local name=$1 noun=$2 key barrier i c r pid load count expected served pair_served
    shift 2
    key=deb-$name-$$-$RANDOM
    barrier=$work/barrier-$name
    mkdir -m 0777 "$barrier"
    local pair=() clients=()
    for i in 1 2; do
        "$@" "op=increment&key=$key&times=5&barrier=$barrier&parties=2" >"$work/$name-pair$i" &
        pair+=($!)
    done
    for pid in "${pair[@]}"; do wait "$pid" || fail "a request to $name at the barrier failed: $(cat "$work/$name"-pair*)"; done
    for c in 1 2 3 4; do
        (
            for ((r = 0; r < 20; r++)); do
                "$@" "op=increment&key=$key&times=5" || exit 1
                echo
            done
        ) >"$work/$name-client$c" &
        clients+=($!)
    done
    for pid in "${clients[@]}"; do wait "$pid" || fail "a client's request to $name failed: $(cat "$work/$name"-client*)"; done
    expected=$((2 * 5 + 4 * 20 * 5))
    load=$("$@" "op=load&keys%5B%5D=$key") || fail "load from $name: $load"
    count=$(php -r '$a = json_decode(stream_get_contents(STDIN), true); echo $a["counts"][$argv[1]] ?? "none";' "$key" <<<"$load")
    served=$(cat "$work/$name"-pair* "$work/$name"-client* | grep -o '"pid":[0-9]*' | sort -u | wc -l)
    pair_served=$(cat "$work/$name"-pair* | grep -o '"pid":[0-9]*' | sort -u | wc -l)
    [ "$pair_served" -eq 2 ] || fail "the two requests to $name at the barrier were not served by two $noun"
    [ "$count" = "$expected" ] || fail "the counter is $count after $expected increments by $served $noun of $name"
    say "$name: counter exact: $count increments from $((2 + 4 * 20)) requests served by $served $noun"
}

# links_of SAPI...: those of the package's conf.d links of these SAPIs that are there
links_of() {
    local sapi link
    for sapi in "$@"; do
        link=/etc/php/$ver/$sapi/conf.d/20-ganesha_shm.ini
        if [ -e "$link" ] || [ -L "$link" ]; then echo "$link"; fi
    done
}

printf '<?php phpinfo(INFO_MODULES);\n' >"$work/phpinfo.php"
chmod 0644 "$work/phpinfo.php"
native=$repo/tests/Fpm/www/native.php
cat >"$work/get.php" <<'PHP'
<?php
// tests/deb.sh's HTTP client: GET $argv[1] (30 s at most); prints the body of a 200, else the
// status line and the body, and exits 1.
$context = stream_context_create(['http' => ['timeout' => 30, 'ignore_errors' => true]]);
$body = @file_get_contents($argv[1], false, $context);
if ($body === false) {
    echo 'no answer from ', $argv[1], ': ', error_get_last()['message'] ?? 'unknown error', "\n";
    exit(1);
}
$status = $http_response_header[0] ?? '';
if (preg_match('#^HTTP/\S+ 200 #', $status) !== 1) {
    echo $status, "\n", $body, "\n";
    exit(1);
}
echo $body;
PHP

# 1. install
say "dpkg -i $deb"
dpkg -i "$deb"
dpkg -L "$package" >"$work/files"
while read -r file; do
    [ -e "$file" ] || fail "dpkg -L lists $file, which is not there"
done <"$work/files"
ini=/etc/php/$ver/mods-available/ganesha_shm.ini
for sapi in cli fpm apache2; do
    link=/etc/php/$ver/$sapi/conf.d/20-ganesha_shm.ini
    [ "$(readlink "$link")" = "$ini" ] || fail "$link is not a link to $ini (phpenmod)"
done
say "phpenmod linked $ini into the conf.d of cli, fpm and apache2"
# The directory for ganesha_shm.path, made at boot by systemd-tmpfiles, and by the postinst now
# where systemd-tmpfiles is installed; root's alone: nobody can create the segment file first.
tmpfiles=/usr/lib/tmpfiles.d/$package.conf
grep -qx 'd /run/ganesha-shm 0755 root root -' "$tmpfiles" || fail "$tmpfiles does not make /run/ganesha-shm root's"
if command -v systemd-tmpfiles >/dev/null; then
    [ "$(stat -c '%U:%G %a' /run/ganesha-shm 2>/dev/null)" = "root:root 755" ] ||
        fail "the postinst did not make /run/ganesha-shm (root:root 755): $(stat -c '%U:%G %a' /run/ganesha-shm 2>&1)"
else
    install -d -m 0755 -o root -g root /run/ganesha-shm   # as systemd-tmpfiles would at boot
    say "no systemd-tmpfiles in this root: /run/ganesha-shm made as $tmpfiles says"
fi
if runuser -u nobody -- touch /run/ganesha-shm/circuits 2>/dev/null; then
    fail "nobody could create a file in /run/ganesha-shm"
fi
say "$tmpfiles: /run/ganesha-shm, root:root 0755; nobody cannot create the segment file first"
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
check_counter php-fpm workers request "$native"
stop_fpm

# 3. Apache with mod_php from Debian's own configuration
changed=$(dpkg -V apache2 "$modphp" 2>&1) || true
[ -z "$changed" ] || fail "files of apache2 or $modphp differ from what the packages ship (dpkg -V): $changed"
cmp -s "/etc/php/$ver/apache2/php.ini" "/usr/lib/php/$ver/php.ini-production" ||
    fail "/etc/php/$ver/apache2/php.ini is not the php.ini-production $modphp installs"
modules=$(apache2ctl -M 2>/dev/null) || fail "apache2ctl -M failed: $(apache2ctl -M 2>&1 | tail -n 5)"
grep -q '^ *mpm_prefork_module ' <<<"$modules" ||
    fail "Apache's MPM is $(a2query -M), not prefork (libapache2-mod-php's postinst switches to prefork)"
grep -q '^ *php_module ' <<<"$modules" || fail "apache2ctl -M does not list php_module ($modphp)"
say "apache2: MPM $(a2query -M) and php_module (apache2ctl -M); apache2's and $modphp's files, php.ini included, as the packages ship them"
{
    cat <<'PHP'
<?php
// Written by ganesha-shm's tests/deb.sh while it runs, and removed when it ends. Without op:
// what mod_php loaded from Debian's configuration. With op: the fpm suite's script of the
// adapter (increment, load, the barrier), as the apache suite serves it.
if (!isset($_GET['op'])) {
    header('Content-Type: text/plain');
    $loaded = extension_loaded('ganesha_shm');
    $scanned = array_filter(
        array_map('trim', explode(',', (string) php_ini_scanned_files())),
        static fn (string $file): bool => str_contains($file, 'ganesha_shm'),
    );
    printf(
        "sapi=%s extension_loaded=%s version=%s segment=%s ini=%s pid=%d ppid=%d\n",
        PHP_SAPI,
        $loaded ? 'true' : 'false',
        $loaded ? phpversion('ganesha_shm') : '-',
        $loaded ? ganesha_shm_info()['segment'] : '-',
        implode(',', $scanned) ?: '-',
        getmypid(),
        function_exists('posix_getppid') ? posix_getppid() : 0,
    );
    return;
}
PHP
    printf "require '%s/tests/Apache/www/native.php';\n" "$repo"
} >"$web"
web_written=yes
chmod 0644 "$web"
# probe yes|no: a request to $web without op says the extension is loaded (or not), from the
# package's conf.d link, and is served by a child of the Apache parent
probe() {
    local expected answer
    answer=$(http_get) || fail "GET /${web##*/} from apache2: $answer"
    if [ "$1" = yes ]; then
        expected="sapi=apache2handler extension_loaded=true version=$version segment=anonymous ini=/etc/php/$ver/apache2/conf.d/20-ganesha_shm.ini pid=* ppid=$apache_pid"
    else
        expected="sapi=apache2handler extension_loaded=false version=- segment=- ini=- pid=* ppid=$apache_pid"
    fi
    # shellcheck disable=SC2053 # $expected is a pattern (pid=*)
    [[ $answer == $expected ]] || fail "a child of apache2 $apache_pid answered: $answer
expected: $expected"
    say "apache2: GET http://127.0.0.1/${web##*/}: $answer"
}
start_apache
probe yes
check_counter apache2 children http_get
stop_apache

# 4. removal, then purge
say "dpkg -r $package"
dpkg -r "$package"
left=$(links_of cli fpm apache2)
[ -z "$left" ] || fail "dpkg -r left the conf.d links $left"
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
start_apache
probe no
if apache_logs | grep -qi 'ganesha'; then fail "apache2 mentions ganesha_shm at startup: $(apache_logs)"; fi
stop_apache
say "apache2 starts again without the extension"

# 5. mod_php installed after the package. The package's `php_invoke enmod <ver> ALL` enables it
# for the SAPIs installed then (/usr/lib/php/<ver>/sapi) and registers it (phpenmod -r,
# /var/lib/php/modules/<ver>/registry); a SAPI package installed later enables, in its postinst,
# every registered module (libapache2-mod-php<ver>: php_invoke enmod for each of phpquery -M).
say "dpkg -r ${modphp_packages[*]}, to install it after the package"
modphp_removed=yes
dpkg -r "${modphp_packages[@]}" >"$work/dpkg-modphp.out" 2>&1 ||
    fail "dpkg -r ${modphp_packages[*]}: $(cat "$work/dpkg-modphp.out")"
[ ! -e "/usr/lib/php/$ver/sapi/apache2" ] || fail "the apache2 SAPI is still registered after dpkg -r $modphp"
say "dpkg -i $deb"
dpkg -i "$deb"
[ "$(links_of cli fpm apache2 | xargs)" = "/etc/php/$ver/cli/conf.d/20-ganesha_shm.ini /etc/php/$ver/fpm/conf.d/20-ganesha_shm.ini" ] ||
    fail "without $modphp, the package's conf.d links are not those of cli and fpm: $(links_of cli fpm apache2 | xargs)"
phpquery -M -v "$ver" | grep -qx ganesha_shm || fail "phpquery -M -v $ver does not list ganesha_shm (phpenmod -r registers it)"
say "without $modphp: linked into the conf.d of cli and fpm only, registered (phpquery -M)"
say "dpkg -i ${modphp_debs[*]}"
dpkg -i "${modphp_debs[@]}" >"$work/dpkg-modphp.out" 2>&1 ||
    fail "dpkg -i ${modphp_debs[*]}: $(cat "$work/dpkg-modphp.out")"
modphp_removed=
link=/etc/php/$ver/apache2/conf.d/20-ganesha_shm.ini
[ "$(readlink "$link")" = "$ini" ] || fail "$modphp, installed after $package, did not link $ini into $link"
say "$modphp, installed after $package, linked $link"
start_apache
probe yes
stop_apache
say "dpkg -P $package"
dpkg -P "$package"
left=$(links_of cli fpm apache2)
[ -z "$left" ] || fail "dpkg -P left the conf.d links $left"
snapshot >"$work/after5"
diff -u "$work/before" "$work/after5" >"$work/diff" || fail "with $modphp removed and installed again, the files below /etc, /usr and /var/lib/php differ from before the first install:
$(cat "$work/diff")"
say "purged: no conf.d link left, $modphp installed again, /etc, /usr and /var/lib/php are as before the first install"

# 6. The fleet sidecar's package.
if [ -n "$fleet_deb" ]; then
    fleet_package=$(dpkg-deb -f "$fleet_deb" Package)
    say "dpkg -i $fleet_deb"
    dpkg -i "$fleet_deb"
    dpkg -L "$fleet_package" | while read -r file; do [ -e "$file" ] || fail "dpkg -L lists $file, which is not there"; done
    [ "$(ganesha-shm-fleet --version)" = "ganesha-shm-fleet $version" ] || fail "ganesha-shm-fleet --version: $(ganesha-shm-fleet --version)"
    unit=/usr/lib/systemd/system/ganesha-shm-fleet.service
    [ -f "$unit" ] || fail "no $unit"
    ! find /etc/systemd/system -name ganesha-shm-fleet.service 2>/dev/null | grep -q . ||
        fail "the unit is enabled on install: $(find /etc/systemd/system -name ganesha-shm-fleet.service)"
    dpkg-query -W -f='${Conffiles}' "$fleet_package" | grep -q '/etc/ganesha-shm/fleet.conf' || fail "fleet.conf is not a conffile"
    # Its man page, with every flag --help gives.
    man_page=/usr/share/man/man8/ganesha-shm-fleet.8.gz
    [ -f "$man_page" ] || fail "no man page at $man_page"
    man_text=$(zcat "$man_page" | sed 's/\\-/-/g')
    for flag in $(ganesha-shm-fleet --help | grep -oE '^  --[a-z-]+'); do
        grep -qF -- "$flag" <<<"$man_text" || fail "the man page lacks $flag, which --help gives"
    done
    status=0
    output=$(ganesha-shm-fleet --config /etc/ganesha-shm/fleet.conf 2>&1) || status=$?
    [ "$status" = 2 ] && echo "$output" | grep -q 'segment is required' ||
        fail "the sidecar with the shipped fleet.conf: exit $status, $output"
    if command -v systemd-analyze >/dev/null 2>&1; then
        systemd-analyze verify "$unit" >"$work/verify" 2>&1 || fail "systemd-analyze verify $unit: $(cat "$work/verify")"
    fi
    say "$fleet_package: installed, its unit not enabled, refusing the shipped fleet.conf until configured: $output"
    dpkg -P "$fleet_package"
    [ ! -e /etc/ganesha-shm ] || fail "dpkg -P $fleet_package left /etc/ganesha-shm: $(ls -A /etc/ganesha-shm)"
    [ ! -e /usr/bin/ganesha-shm-fleet ] || fail "dpkg -P $fleet_package left /usr/bin/ganesha-shm-fleet"
    say "$fleet_package purged: nothing of it left"
fi
say "passed"
