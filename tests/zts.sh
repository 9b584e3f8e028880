#!/usr/bin/env bash
# Builds a thread-safe PHP 8.2 for the zts suite from Debian's own source package (the php8.2 of
# the archive this machine installs from), into a cache outside the repository:
#
#   $GANESHA_SHM_ZTS_CACHE/php-<source version>/     (default /var/cache/ganesha-shm-ci/zts)
#     bin/php, bin/php-config, bin/phpize   the ZTS CLI and the tools to build extensions for it
#     lib/php/libphp.so                     the embed SAPI, which tests/Zts/harness.c runs on threads
#     apache/libphp.so                      mod_php for Apache's event MPM (apxs2), never installed
#                                           into Apache's own module directory
#   $GANESHA_SHM_ZTS_CACHE/current          a link to the newest build, which the tests use
#
#   bash tests/zts.sh            builds what is missing; a warm cache builds nothing
#   bash tests/zts.sh --check    exits 0 when the cache is complete, 1 when not (builds nothing)
#
# Needs root on Debian 12. It adds one apt source of its own
# (/etc/apt/sources.list.d/ganesha-shm-deb-src.sources: deb-src for the suites the system's
# sources name) and removes nothing of the system's. Both SAPIs come from one source tree, compiled
# through ccache: the second configure differs from the first in one define of php_config.h
# (ENABLE_CHROOT_FUNC, which mod_php leaves out), which makes make recompile everything, and
# ccache hand back every object whose preprocessed source did not change, so mod_php costs little
# more than preprocessing and linking. Prints the time of each step.
set -euo pipefail

cache=${GANESHA_SHM_ZTS_CACHE:-/var/cache/ganesha-shm-ci/zts}
source_list=/etc/apt/sources.list.d/ganesha-shm-deb-src.sources

say() { echo "zts.sh: $*"; }
die() { echo "zts.sh: $*" >&2; exit 1; }
complete() { [ -x "$1/bin/php" ] && [ -x "$1/bin/php-config" ] && [ -f "$1/lib/php/libphp.so" ] && [ -f "$1/apache/libphp.so" ]; }

if [ "${1:-}" = --check ]; then
    complete "$cache/current"
    exit
fi
[ $# -eq 0 ] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (apt-get source and the build dependencies)"

# The versions of the source package apt knows, newest first; the cache is named by the version.
versions_known() {
    { apt-cache showsrc php8.2 2>/dev/null || true; } | sed -n 's/^Version: //p' | sort -rV | uniq
}

# deb-src for each suite and URI the system's deb822 sources name (one file, only ours).
add_deb_src() {
    [ -f "$source_list" ] && return
    local file
    {
        echo "# Added by ganesha-shm's tests/zts.sh: Debian's source packages, for a thread-safe PHP."
        for file in /etc/apt/sources.list.d/*.sources; do
            [ "$file" = "$source_list" ] && continue
            awk 'BEGIN { RS = ""; FS = "\n" }
                 /(^|\n)Types:[^\n]*deb([ \n]|$)/ && !/(^|\n)Enabled: *no/ {
                     print "Types: deb-src"
                     for (i = 1; i <= NF; i++)
                         if ($i ~ /^(URIs|Suites|Components|Signed-By):/) print $i
                     print ""
                 }' "$file"
        done
        if [ -f /etc/apt/sources.list ]; then
            sed -nE 's/^deb (\[[^]]*\] )?([^ ]+) ([^ ]+) (.*)$/Types: deb-src\nURIs: \2\nSuites: \3\nComponents: \4\n/p' /etc/apt/sources.list
        fi
    } > "$source_list.tmp"
    grep -q '^Types: deb-src' "$source_list.tmp" || { rm -f "$source_list.tmp"; die "no Debian source in /etc/apt to add deb-src for"; }
    mv "$source_list.tmp" "$source_list"
    say "added $source_list"
}

started=$(date +%s)
step=$started
lap() { local now; now=$(date +%s); say "$1: $((now - step)) s"; step=$now; }

versions=$(versions_known)
if [ -z "$versions" ]; then
    add_deb_src
    apt-get update -qq
    versions=$(versions_known)
fi
[ -n "$versions" ] || die "apt knows no source package php8.2 (is this Debian 12?)"
for version in $versions; do
    if complete "$cache/php-$version"; then
        ln -sfn "php-$version" "$cache/current"
        say "PHP $version ZTS: cached at $cache/php-$version"
        exit 0
    fi
done

export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends build-essential autoconf bison re2c pkg-config dpkg-dev \
    apache2-dev ccache >/dev/null
lap "build dependencies"

# The newest version whose source the archive serves (a mirror may list a security update's source
# before, or without, serving it). Downloaded as root into the cache, so apt's sandbox user is not
# used.
work=
for version in $versions; do
    work=$cache/src-$version
    rm -rf "$work"
    mkdir -p "$work"
    if (cd "$work" && apt-get source -qq --download-only -o APT::Sandbox::User=root "php8.2=$version" >/dev/null 2>"$work/apt.log"); then
        break
    fi
    say "php8.2 $version: the archive serves no source ($(grep -m1 -o '[0-9]\{3\} [A-Za-z ]*' "$work/apt.log" || echo 'apt-get source failed')); trying an older one"
    rm -rf "$work"
    work=
done
[ -n "$work" ] || die "no version of php8.2's source could be downloaded: $versions"
prefix=$cache/php-$version
say "PHP $version ZTS: building into $prefix"
rm -rf "$prefix"
# apt-get source checked the files against the archive's signed index; dpkg-source's check of
# the maintainer's signature, whose key Debian 12 does not install, only warns: its output is
# shown when it fails.
dpkg-source -x "$work"/php8.2_*.dsc "$work/source" >"$work/dpkg-source.log" 2>&1 ||
    { cat "$work/dpkg-source.log" >&2; die "dpkg-source -x failed"; }
lap "source"
cd "$work/source"
./buildconf --force >/dev/null 2>&1

# Only what the suite's scripts use: the CLI (a separate process sharing a segment file), pcntl and
# posix. Debian's tree installs libphp.so into lib/php, and phpize needs share/aclocal there.
common=(--prefix="$prefix" --enable-zts --disable-all --disable-cgi --disable-phpdbg --without-pear
        --enable-cli --enable-pcntl --enable-posix --enable-ctype --enable-tokenizer --enable-filter)
build() {
    make -s -j"$(nproc)" >/dev/null 2>"$work/make.log" || { tail -n 40 "$work/make.log" >&2; die "make failed"; }
}
# ccache's cache lives and dies with this build.
export CC="ccache gcc" CCACHE_DIR="$work/ccache" CCACHE_NOHASHDIR=1
./configure -q "${common[@]}" --enable-embed=shared >/dev/null
build
make -s install >/dev/null
mkdir -p "$prefix/share/aclocal"
lap "embed SAPI and CLI"

# mod_php from the same tree; libs/libphp.so is copied, never `make install`ed (that would run
# apxs -i on Apache's own directory).
./configure -q "${common[@]}" --with-apxs2=/usr/bin/apxs2 >/dev/null
build
mkdir -p "$prefix/apache"
cp libs/libphp.so "$prefix/apache/libphp.so"
lap "apache2handler SAPI"

complete "$prefix" || die "the build left $prefix incomplete"
ln -sfn "php-$version" "$cache/current"
rm -rf "$work"
say "PHP $version ZTS: built in $(($(date +%s) - started)) s ($("$prefix/bin/php" -r 'echo PHP_VERSION, PHP_ZTS ? " ZTS" : " NTS";'))"
