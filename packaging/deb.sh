#!/usr/bin/env bash
# Builds the Debian package php<ver>-ganesha-shm_<version>_<arch>.deb of the ganesha_shm
# extension for the PHP whose php-config it finds (PHP_CONFIG, else php-config on PATH): PHP 8.2
# on Debian 12, 8.4 on Debian 13; and beside it ganesha-shm-fleet_<version>_<arch>.deb, the
# fleet sidecar (/usr/bin/ganesha-shm-fleet, its systemd unit, installed disabled, and
# /etc/ganesha-shm/fleet.conf, a conffile, and its man page ganesha-shm-fleet(8)). Then runs
# lintian on both, when lintian is installed, and fails on any error or warning lintian reports. Prints the PHP package's path, last.
#
#   bash packaging/deb.sh [--output DIR]    (default DIR: target/deb)
#
# The package holds:
#   <php-config --extension-dir>/ganesha_shm.so            the extension, stripped
#   /etc/php/<ver>/mods-available/ganesha_shm.ini          extension= and every setting (a conffile)
#   /usr/share/doc/php<ver>-ganesha-shm/                   copyright, changelog.gz, README.md.gz, docs/*.md.gz
#   /usr/lib/tmpfiles.d/php<ver>-ganesha-shm.conf          /run/ganesha-shm, root's, made at boot
# and maintainer scripts that enable it for every SAPI with phpenmod on install, disable it with
# phpdismod on removal and remove the conf file on purge, as Debian's own PHP extension packages
# do. It depends on the PHP API it was built for (phpapi-<api>) and php<ver>-common.
#
# The environment it honours: PHP_CONFIG, CARGO, CARGO_TARGET_DIR and LIBCLANG_PATH (the build is
# packaging/cargo-build.sh, the one every install route runs); DEBFULLNAME and DEBEMAIL, the
# package's maintainer (as for dch); SOURCE_DATE_EPOCH, the changelog's date (default: the last
# commit's, else now). Needs dpkg-dev, binutils (strip) and the PHP's php-dev; run as any user.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

say() { printf 'deb: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

out=$repo/target/deb
while [ $# -gt 0 ]; do
    case $1 in
        --output) [ $# -ge 2 ] || die "--output needs a directory"; out=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (usage: bash packaging/deb.sh [--output DIR])" ;;
    esac
done

missing=()
for tool in dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev strip:binutils gzip:gzip; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
php_config=${PHP_CONFIG:-php-config}
command -v "$php_config" >/dev/null 2>&1 || missing+=(php-dev)
((${#missing[@]} == 0)) || die "missing: apt-get install ${missing[*]}"

php_version=$("$php_config" --version)
ver=$(echo "$php_version" | cut -d. -f1,2)
extdir=$("$php_config" --extension-dir)
# Debian's php-config knows the API (its packages Provide phpapi-<api>); PHP's own prints it in php -i
api=$("$php_config" --phpapi 2>/dev/null || true)
if ! [[ $api =~ ^[0-9]{8}$ ]]; then
    api=$("$("$php_config" --php-binary)" -n -i | sed -n 's/^PHP API => //p')
fi
[[ $api =~ ^[0-9]{8}$ ]] || die "could not read the PHP API of $php_config (--phpapi, php -i)"
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\([^"]*\)"/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml"
arch=$(dpkg --print-architecture)
package=php$ver-ganesha-shm
deb=$out/${package}_${version}_${arch}.deb
maintainer="${DEBFULLNAME:-The ganesha-shm developers} <${DEBEMAIL:-ganesha-shm@users.noreply.github.com}>"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

say "building $package $version for PHP $php_version (API $api, $extdir)"
so=$(PHP_CONFIG=$php_config sh packaging/cargo-build.sh)
loaded=$("$("$php_config" --php-binary)" -n -d "extension=$so" -r 'echo phpversion("ganesha_shm");' 2>&1) || loaded=
[ "$loaded" = "$version" ] || die "PHP $php_version does not load $so as ganesha_shm $version: ${loaded:-it failed}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tree=$stage/tree
umask 022
install -d "$tree/DEBIAN" "$tree$extdir" "$tree/etc/php/$ver/mods-available" "$tree/usr/share/doc/$package" \
    "$tree/usr/lib/tmpfiles.d"
install -m 0644 "$so" "$tree$extdir/ganesha_shm.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$tree$extdir/ganesha_shm.so"

subst() { sed -e "s/@PHP_VERSION@/$ver/g" -e "s/@PACKAGE@/$package/g" "$1"; }
subst packaging/debian/ganesha_shm.ini >"$tree/etc/php/$ver/mods-available/ganesha_shm.ini"
subst packaging/debian/tmpfiles.conf >"$tree/usr/lib/tmpfiles.d/$package.conf"
# docs DIR WHAT: the copyright, the README and the pages of docs/ it links to, and a changelog of
# one entry saying WHAT, into DIR.
docs() {
    install -m 0644 packaging/debian/copyright "$1/copyright"
    gzip -9n <README.md >"$1/README.md.gz"
    install -d -m 0755 "$1/docs"
    for page in docs/*.md; do
        gzip -9n <"$page" >"$1/docs/${page#docs/}.gz"
    done
    {
        echo "ganesha-shm ($version) unstable; urgency=medium"
        echo
        echo "  * $2, built by packaging/deb.sh."
        echo
        echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
    } | gzip -9n >"$1/changelog.gz"
}
# finish TREE DEB: the md5sums of TREE, then the package DEB built from it.
finish() {
    (cd "$1" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$1/DEBIAN/md5sums"
    chmod 0644 "$1/DEBIAN/control" "$1/DEBIAN/conffiles" "$1/DEBIAN/md5sums"
    mkdir -p "$(dirname "$2")"
    dpkg-deb --root-owner-group -Zxz --build "$1" "$2" >/dev/null
    say "built $2"
}
docs "$tree/usr/share/doc/$package" "The ganesha_shm extension $version for PHP $ver"

for script in postinst prerm postrm; do
    subst "packaging/debian/$script" >"$tree/DEBIAN/$script"
    chmod 0755 "$tree/DEBIAN/$script"
done
echo "/etc/php/$ver/mods-available/ganesha_shm.ini" >"$tree/DEBIAN/conffiles"

# The shared libraries the extension links (libc, libgcc_s), as dpkg-shlibdeps finds them.
mkdir -p "$stage/src/debian"
printf 'Source: ganesha-shm\n\nPackage: %s\nArchitecture: any\n' "$package" >"$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O -e"$tree$extdir/ganesha_shm.so" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no library dependencies of ganesha_shm.so"

cat >"$tree/DEBIAN/control" <<EOF
Package: $package
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$tree" | cut -f1)
Depends: php$ver-common, phpapi-$api, $shlibs
Section: php
Priority: optional
Description: shared-memory circuit store of the Ganesha circuit breaker for PHP $ver
 The ganesha_shm extension keeps the circuits of Ganesha, the PHP circuit
 breaker, in shared memory: every php-fpm worker of a master sees the same
 circuits, so a failing service trips once for the whole pool. PHP code uses
 it through the SlidingTimeWindowShm adapter of the Composer package
 zeusi/ganesha-shm-adapter.
 .
 This package enables the extension for every SAPI of PHP $ver with phpenmod.
 Its settings are in /etc/php/$ver/mods-available/ganesha_shm.ini.
EOF
finish "$tree" "$deb"

# The fleet sidecar's package, ganesha-shm-fleet: the same for every PHP, since it links no PHP.
fleet_package=ganesha-shm-fleet
fleet_deb=$out/${fleet_package}_${version}_${arch}.deb
fleet_tree=$stage/fleet
say "building $fleet_package $version"
sidecar=$(sh packaging/cargo-build.sh fleet)
install -d "$fleet_tree/DEBIAN" "$fleet_tree/usr/bin" "$fleet_tree/usr/lib/systemd/system" "$fleet_tree/etc/ganesha-shm" \
    "$fleet_tree/usr/share/doc/$fleet_package" "$fleet_tree/usr/share/man/man8"
install -m 0755 "$sidecar" "$fleet_tree/usr/bin/ganesha-shm-fleet"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$fleet_tree/usr/bin/ganesha-shm-fleet"
# ganesha-shm-fleet(8): what the sidecar prints with --man, written from the table its --help is.
"$sidecar" --man | gzip -9n >"$fleet_tree/usr/share/man/man8/ganesha-shm-fleet.8.gz"
install -m 0644 packaging/debian/fleet/ganesha-shm-fleet.service "$fleet_tree/usr/lib/systemd/system/"
install -m 0644 packaging/debian/fleet/fleet.conf "$fleet_tree/etc/ganesha-shm/fleet.conf"
docs "$fleet_tree/usr/share/doc/$fleet_package" "The fleet sidecar ganesha-shm-fleet $version"
for script in postinst prerm postrm; do
    install -m 0755 "packaging/debian/fleet/$script" "$fleet_tree/DEBIAN/$script"
done
echo /etc/ganesha-shm/fleet.conf >"$fleet_tree/DEBIAN/conffiles"
printf 'Source: ganesha-shm\n\nPackage: %s\nArchitecture: any\n' "$fleet_package" >"$stage/src/debian/control"
fleet_shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O -e"$fleet_tree/usr/bin/ganesha-shm-fleet" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$fleet_shlibs" ] || die "dpkg-shlibdeps found no library dependencies of ganesha-shm-fleet"
cat >"$fleet_tree/DEBIAN/control" <<EOF
Package: $fleet_package
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$fleet_tree" | cut -f1)
Depends: $fleet_shlibs
Suggests: redis-server
Section: net
Priority: optional
Description: fleet sidecar of ganesha-shm, the Ganesha circuit store in shared memory
 ganesha-shm-fleet shares the circuit counts of a host's ganesha_shm segment
 with the other hosts of its fleet through a Redis they all reach: every
 second it publishes what this host counted and writes what the others
 published into the segment, so that PHP requests never touch the network.
 .
 The service is installed disabled: set segment, redis and fleet in
 /etc/ganesha-shm/fleet.conf, then systemctl enable --now ganesha-shm-fleet.
 PHP runs with ganesha_shm.fleet=1 and ganesha_shm.path.
EOF
finish "$fleet_tree" "$fleet_deb"

if command -v lintian >/dev/null 2>&1; then
    for built in "$deb" "$fleet_deb"; do
        say "lintian $built"
        # lintian refuses to run as root without this (it is only reading the package)
        lintian --allow-root --display-info --fail-on error,warning "$built" >&2 || die "lintian reported errors or warnings"
        say "lintian: no errors, no warnings"
    done
else
    say "lintian is not installed (apt-get install lintian): the packages were not checked"
fi
# The fleet package is beside it: ganesha-shm-fleet_<version>_<arch>.deb.
echo "$deb"
