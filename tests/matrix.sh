#!/usr/bin/env bash
# Runs the test suites under other PHP builds than the host's, each in a Debian root made with
# debootstrap from Debian's archive. The roots are kept outside the repository, under
# $GANESHA_SHM_MATRIX_CACHE (default /var/cache/ganesha-shm-matrix), and reused while intact.
#
#   bash tests/matrix.sh            lists the targets and whether their roots are cached
#   bash tests/matrix.sh php8.4     every suite (cargo test and every PHPUnit suite but zts and
#                                   swoole, Ganesha from GANESHA_DIR) on Debian 13's PHP 8.4,
#                                   PHPUnit 11, php-fpm and Apache with mod_php
#   bash tests/matrix.sh zts        PHP 8.4 built with --enable-zts from Debian's php8.4 source
#                                   package, then the native suite on its CLI
#   bash tests/matrix.sh deb        the Debian package of Debian 13's PHP 8.4, built in the root by
#                                   packaging/deb.sh (lintian: no error), installed with dpkg -i
#                                   and served by Debian's php-fpm and by Debian's Apache with
#                                   mod_php, each from its own configuration, then removed and
#                                   purged, and installed before mod_php (tests/deb.sh)
#
# Needs root (debootstrap, chroot, mount). The extension is built inside the root, against that
# PHP's php-config, with the host's Rust toolchain (CARGO_HOME and RUSTUP_HOME are bound into it).
# /proc, /dev, /dev/pts and /dev/shm are mounted in the root for the run and unmounted however it
# ends. Arguments after the target go to PHPUnit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

cache=${GANESHA_SHM_MATRIX_CACHE:-/var/cache/ganesha-shm-matrix}
mirror=${GANESHA_SHM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
root=$cache/$suite
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
# What the root holds beyond what .ci/install-deps installs in it (debootstrap's minbase has no
# ps or kill for the fpm suite's clean-up, and apt-get source needs dpkg-dev and deb-src; the deb
# target checks its package with lintian). apache2 and libapache2-mod-php8.4 (Debian 13's mod_php,
# /usr/lib/apache2/modules/libphp8.4.so), Guzzle and Symfony HttpClient (the middleware suite's)
# are install-deps' too, named here so that a root cached before their suites gets them: a changed
# list is installed into it. valkey-server is for the fleet suite's Valkey tests, which run only
# here (Debian 12 has no Valkey), and redis-sentinel is install-deps' too. In the root no service
# starts on install (no init, no runlevel: invoke-rc.d declines), so no apache2 is left running.
root_packages=(procps dpkg-dev lintian apache2 libapache2-mod-php8.4 php-guzzlehttp-guzzle php-symfony-http-client
               valkey-server redis-sentinel)
# A root is intact when this marker holds the packages it was made with: a changed list is
# installed into the existing root, and a root without the marker is made again.
marker=.ganesha-shm-root

usage() {
    cat <<EOF
usage: bash tests/matrix.sh [TARGET] [PHPUnit arguments]

targets:
  php8.4   every suite but zts and swoole on Debian 13's PHP 8.4 (PHPUnit 11), Ganesha from GANESHA_DIR
  zts      the native suite on PHP 8.4 built with --enable-zts from Debian's php8.4 source
  deb      the Debian package for PHP 8.4: built, checked by lintian, installed, served by
           Debian's php-fpm and Apache with mod_php, purged

cache: $cache
EOF
    local state=absent
    [ -f "$root/$marker" ] && state=ready
    echo "  root $suite: $state"
    state=absent
    [ -x "$root/opt/php-zts/bin/php" ] && state=ready
    echo "  zts PHP: $state"
}

say() { printf 'matrix: %s\n' "$*"; }
elapsed() { echo "$(($(date +%s) - $1)) s"; }

# Unmounts whatever is still mounted below the root (a run that was SIGKILLed cannot unmount),
# so that nothing below it is a mount of the repository or of the Rust toolchain when the root
# is removed.
unmount_stale() {
    local dir
    for dir in "$root" "$root.new"; do
        awk -v dir="$dir/" 'index($2 "/", dir) == 1 { print $2 }' /proc/mounts | sort -r |
            while read -r target; do umount -l "$target" || true; done
    done
}

mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[i]}" 2>/dev/null || true
    done
    mounted=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# mount_in TARGET_IN_ROOT MOUNT_ARGS...: mounts inside the root, remembered for unmount_all.
mount_in() {
    local target=$root$1
    shift
    mkdir -p "$target"
    mountpoint -q "$target" && umount -l "$target"
    mount "$@" "$target"
    mounted+=("$target")
}

mount_root() {
    mount_in /proc -t proc proc
    mount_in /dev --bind /dev
    mount_in /dev/pts --bind /dev/pts
    mount_in /dev/shm -t tmpfs -o mode=1777 tmpfs
    mount_in /src/ganesha-shm --bind "$repo"
    mount_in "$cargo_home" --bind "$cargo_home"
    mount_in "$rustup_home" --bind "$rustup_home"
    if [ -n "${GANESHA_DIR:-}" ]; then
        mount_in /src/ganesha -o ro --bind "$(cd "$GANESHA_DIR" && pwd)"
    fi
    cp -L /etc/resolv.conf "$root/etc/resolv.conf"
}

# in_root COMMAND...: runs a command in the root as root, with a clean environment (the fleet's
# simulation, which does not depend on PHP, runs once, outside the root).
in_root() {
    chroot "$root" /usr/bin/env -i \
        HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" \
        PATH="$cargo_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" \
        GANESHA_SHM_FLEET_SIM=0 DEBIAN_FRONTEND=noninteractive "$@"
}

ensure_root() {
    local wanted=${root_packages[*]}
    unmount_stale
    if [ -f "$root/$marker" ] && [ ! -x "$root/usr/bin/php" ]; then
        say "root $suite: no PHP in it, making it again"
        rm -f "$root/$marker"
    fi
    if [ -f "$root/$marker" ] && [ "$(cat "$root/$marker")" = "$wanted" ]; then
        say "root $suite: cached at $root"
        return
    fi
    local started
    started=$(date +%s)
    if [ ! -f "$root/$marker" ]; then
        command -v debootstrap >/dev/null || {
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
        }
        say "root $suite: debootstrap from $mirror into $root"
        rm -rf --one-file-system "$root.new"
        mkdir -p "$cache"
        debootstrap --variant=minbase "$suite" "$root.new" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
            tail -n 20 "$cache/debootstrap.log"
            exit 1
        }
        printf 'deb %s %s main\ndeb-src %s %s main\n' "$mirror" "$suite" "$mirror" "$suite" \
            >"$root.new/etc/apt/sources.list"
        rm -rf --one-file-system "$root"
        mv "$root.new" "$root"
    fi
    mount_root
    in_root apt-get update -qq
    in_root apt-get install -y -qq --no-install-recommends "${root_packages[@]}" >/dev/null
    # The same dependencies the host installs, from Debian 13's archive.
    in_root bash /src/ganesha-shm/.ci/install-deps
    unmount_all
    echo "$wanted" >"$root/$marker"
    say "root $suite: ready in $(elapsed "$started")"
}

run_php84() {
    ensure_root
    mount_root
    local ganesha_env=()
    [ -n "${GANESHA_DIR:-}" ] && ganesha_env=(GANESHA_DIR=/src/ganesha)
    say "php8.4: $(in_root php -r 'echo PHP_VERSION;'), $(in_root phpunit --version | head -n 1)"
    # A target directory of its own, kept in the root: the host's target/ is built for PHP 8.2.
    # The zts and swoole suites run on the host: their builds (tests/zts.sh, tests/swoole.sh) are
    # PHP 8.2's. Of the Rust tests, the extension crate's alone: the others have no PHP in them,
    # and run on the host.
    in_root "${ganesha_env[@]}" CARGO_TARGET_DIR=/var/cache/ganesha-shm-target GANESHA_SHM_CARGO_TEST=extension \
        bash -c 'cd /src/ganesha-shm && exec bash tests/run.sh "$@"' run.sh --exclude-testsuite zts,swoole "$@"
}

# PHP 8.4 with --enable-zts, from the php8.4 source package of the root's archive: only the CLI
# and the extensions the native suite uses, installed under /opt/php-zts in the root.
ensure_zts_php() {
    ensure_root
    if [ -x "$root/opt/php-zts/bin/php" ]; then
        say "zts PHP: cached at $root/opt/php-zts"
        return
    fi
    local started
    started=$(date +%s)
    mount_root
    say "zts PHP: building from Debian's php8.4 source package"
    in_root apt-get install -y -qq --no-install-recommends build-essential autoconf bison re2c \
        pkg-config libxml2-dev libsqlite3-dev >/dev/null
    in_root bash -euc '
        rm -rf /usr/src/php-zts && mkdir -p /usr/src/php-zts && cd /usr/src/php-zts
        if ! apt-get source -qq --download-only php8.4 >/dev/null; then
            echo "matrix: zts: apt-get source php8.4 failed: the Debian archive this machine reaches serves no source package (see above)" >&2
            exit 1
        fi
        dpkg-source -x ./php8.4_*.dsc source >/dev/null
        cd source
        ./configure -q --prefix=/opt/php-zts --enable-zts --disable-all --disable-cgi \
            --disable-phpdbg --without-pear --enable-cli --enable-pcntl --enable-posix \
            --enable-ctype --enable-dom --enable-xml --enable-xmlwriter --enable-tokenizer \
            --with-libxml --enable-filter --enable-mbstring --disable-mbregex >/dev/null
        make -s -j"$(nproc)" >/dev/null 2>&1 || make -j1
        make -s install >/dev/null
    '
    unmount_all
    say "zts PHP: built in $(elapsed "$started")"
}

run_zts() {
    ensure_zts_php
    mount_root
    say "zts: $(in_root /opt/php-zts/bin/php -r 'echo PHP_VERSION, PHP_ZTS ? " ZTS" : " NTS";')"
    in_root CARGO_TARGET_DIR=/var/cache/ganesha-shm-target-zts PHP_CONFIG=/opt/php-zts/bin/php-config \
        PHP=/opt/php-zts/bin/php PATH="/opt/php-zts/bin:$cargo_home/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        bash -c 'cd /src/ganesha-shm && exec bash tests/run.sh --testsuite native "$@"' run.sh "$@"
}

# The Debian package for the root's PHP, built there by packaging/deb.sh (into the root's
# /var/cache/ganesha-shm-deb, with the target directory of run_php84), then tests/deb.sh.
run_deb() {
    ensure_root
    mount_root
    local started deb fleet_deb
    started=$(date +%s)
    say "deb: PHP $(in_root php -r 'echo PHP_VERSION;'), $(in_root lintian --version)"
    deb=$(in_root CARGO_TARGET_DIR=/var/cache/ganesha-shm-target \
        bash /src/ganesha-shm/packaging/deb.sh --output /var/cache/ganesha-shm-deb | tail -n 1)
    say "deb: built $(basename "$deb") in $(elapsed "$started")"
    in_root dpkg-deb -c "$deb"
    started=$(date +%s)
    # packaging/deb.sh builds the fleet sidecar's package beside it
    fleet_deb=$(dirname "$deb")/ganesha-shm-fleet_$(in_root dpkg-deb -f "$deb" Version)_$(in_root dpkg-deb -f "$deb" Architecture).deb
    in_root dpkg-deb -c "$fleet_deb"
    in_root bash /src/ganesha-shm/tests/deb.sh "$deb" "$fleet_deb"
    say "deb: tested in $(elapsed "$started")"
}

target=${1:-}
[ $# -gt 0 ] && shift
case "$target" in
    php8.4) run_php84 "$@" ;;
    zts) run_zts "$@" ;;
    deb) run_deb ;;
    "") usage ;;
    *) usage >&2; exit 2 ;;
esac
