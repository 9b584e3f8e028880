#!/bin/sh
# The one build of the ganesha_shm extension that every install route runs:
# vendor/bin/ganesha-shm-install, `make` after phpize and ./configure (Makefile.frag), and
# packaging/deb.sh. Runs `cargo build --release --locked` for one PHP and prints the absolute
# path of the shared object cargo built, alone on stdout; cargo's own output goes to stderr.
#
#   sh packaging/cargo-build.sh          the extension
#   sh packaging/cargo-build.sh fleet    the fleet sidecar, ganesha-shm-fleet (no PHP needed)
#
#   PHP_CONFIG        php-config of the PHP to build for (default: php-config on PATH)
#   PHP               that PHP's CLI, which ext-php-rs runs (default: php-config --php-binary)
#   CARGO             cargo (default: cargo on PATH, else $CARGO_HOME/bin/cargo, ~/.cargo/bin/cargo)
#   CARGO_TARGET_DIR  where cargo builds (default: target/ in the package directory)
#   LIBCLANG_PATH     the directory holding libclang.so, when bindgen does not find it
#
# An empty variable counts as unset. PHP and PHP_CONFIG reach cargo only when they name other
# files than `php` and `php-config` on PATH: ext-php-rs regenerates its bindings, and cargo
# rebuilds it, whenever they change, so routes that find the same PHP share one build.
#
# Exit status: 0 built; 1 cargo or php-config is missing; 3 the build failed.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-extension}
case $what in
    extension|fleet) ;;
    *) printf 'cargo-build: unknown argument %s (usage: cargo-build.sh [fleet])\n' "$what" >&2; exit 1 ;;
esac
say() { printf 'cargo-build: %s\n' "$*" >&2; }

# The file a command name or path resolves to, symbolic links followed; empty when none.
resolve() {
    case $1 in
        */*) [ -x "$1" ] || return 0; readlink -f "$1" ;;
        *) p=$(command -v "$1" 2>/dev/null) || return 0; readlink -f "$p" ;;
    esac
}

for var in PHP_CONFIG PHP CARGO CARGO_TARGET_DIR LIBCLANG_PATH; do
    eval "[ -n \"\${$var:-}\" ] || unset $var"
done

cargo=${CARGO:-}
if [ -z "$cargo" ]; then
    cargo=$(command -v cargo 2>/dev/null) || cargo=
    for candidate in "${CARGO_HOME:-}/bin/cargo" "${HOME:-/nonexistent}/.cargo/bin/cargo"; do
        [ -n "$cargo" ] && break
        [ -x "$candidate" ] && cargo=$candidate
    done
fi
if [ -z "$cargo" ] || [ ! -x "$(resolve "$cargo")" ]; then
    say "cargo (Rust >= 1.85) was not found: install it with rustup (https://rustup.rs), or set CARGO"
    exit 1
fi
# rustup's cargo finds rustc next to itself, once its directory is on PATH
command -v cargo >/dev/null 2>&1 || PATH=$(dirname "$cargo"):$PATH
export PATH

if [ "$what" = extension ]; then
    php_config=${PHP_CONFIG:-php-config}
    if [ -z "$(resolve "$php_config")" ]; then
        say "php-config ($php_config) was not found: apt-get install php-dev, or set PHP_CONFIG"
        exit 1
    fi
    php=${PHP:-$("$php_config" --php-binary)}
    if [ "$(resolve "$php_config")" = "$(resolve php-config)" ]; then unset PHP_CONFIG; else export PHP_CONFIG="$php_config"; fi
    if [ "$(resolve "$php")" = "$(resolve php)" ]; then unset PHP; else export PHP="$php"; fi
fi

# One package of the workspace: the extension, or the sidecar, which only those who ship it
# build (packaging/deb.sh).
if [ "$what" = extension ]; then
    set -- build --release --manifest-path "$root/Cargo.toml" --package ganesha-shm
    built="PHP $("$php_config" --version)"
else
    set -- build --release --manifest-path "$root/Cargo.toml" --package ganesha-shm-fleet
    built="the fleet sidecar"
fi
[ -f "$root/Cargo.lock" ] && set -- "$@" --locked
say "$cargo $* ($built, ${CARGO_TARGET_DIR:-$root/target})"
"$cargo" "$@" >&2 || {
    status=$?
    say "cargo exited with $status"
    exit 3
}

# The target directory as cargo resolved it (CARGO_TARGET_DIR, or its configuration).
target=$("$cargo" metadata --format-version 1 --no-deps --offline --manifest-path "$root/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"\\]*\)".*/\1/p')
if [ "$what" = fleet ]; then
    if [ -n "$target" ] && [ -x "$target/release/ganesha-shm-fleet" ]; then
        printf '%s\n' "$target/release/ganesha-shm-fleet"
        exit 0
    fi
    say "cargo succeeded, but no ganesha-shm-fleet is in ${target:-its target directory}"
    exit 3
fi
for so in "$target/release/libganesha_shm.so" "$target/release/libganesha_shm.dylib"; do
    if [ -n "$target" ] && [ -f "$so" ]; then
        printf '%s\n' "$so"
        exit 0
    fi
done
say "cargo succeeded, but no libganesha_shm.so is in ${target:-its target directory}"
exit 3
