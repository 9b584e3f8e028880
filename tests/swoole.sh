#!/usr/bin/env bash
# Builds Swoole from a git directory of swoole/swoole-src, with phpize against the PHP on PATH,
# into a cache outside the repository, where the swoole suite (tests/Swoole) finds it.
#
#   bash tests/swoole.sh GIT_DIR [TAG]     (default tag: v6.2.2)
#
# GIT_DIR is a clone's .git, or a bare repository. The build goes to
# $GANESHA_SHM_SWOOLE_CACHE/<tag>/swoole.so (default /var/cache/ganesha-shm-ci/swoole/<tag>), the
# commit noted beside it. A build of that commit that this PHP loads is left as it is, so a second
# run builds nothing. Configured minimal (no brotli, no curl, no thread mode); the Debian packages
# it needs and lacks (php-dev, g++, make, pkg-config, libssl-dev) are installed with apt-get.
set -euo pipefail

cache=${GANESHA_SHM_SWOOLE_CACHE:-/var/cache/ganesha-shm-ci/swoole}
phpize=${PHPIZE:-phpize}
php_config=${PHP_CONFIG:-php-config}
php=${PHP:-php}

die() { echo "swoole.sh: $*" >&2; exit 1; }

case "${1:-}" in
    ''|-h|--help)
        sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
        [ -n "${1:-}" ] && exit 0
        exit 2 ;;
esac
git_dir=$1
tag=${2:-v6.2.2}
(($# <= 2)) || die "one tag at most (got: ${*:2})"
started=$SECONDS

[ -d "$git_dir" ] || die "$git_dir: no such directory"
# A clone's top is accepted too.
[ -d "$git_dir/.git" ] && git_dir=$git_dir/.git
command git --git-dir="$git_dir" rev-parse --git-dir >/dev/null 2>&1 || die "$git_dir: not a git directory"

git() { command git --git-dir="$git_dir" "$@"; }

[[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$tag: not a release tag (expected vX.Y.Z)"
commit=$(git rev-parse -q --verify "refs/tags/$tag^{commit}") ||
    die "$git_dir has no tag $tag (is it a clone of swoole/swoole-src with its tags? git fetch --tags)"
# Swoole's repository is told by its extension's header and its composer.json at that tag.
git cat-file -e "$commit:php_swoole.h" 2>/dev/null &&
    git show "$commit:composer.json" 2>/dev/null | grep -q '"name": *"swoole/swoole"' ||
    die "$git_dir: tag $tag holds no swoole/swoole-src (no php_swoole.h, or composer.json names another package)"

dest=$cache/$tag
version=${tag#v}
# What a build must be: of this commit, and loaded by this PHP (the same PHP API) as Swoole $version.
loads() {
    "$php" -n -d "extension=$dest/swoole.so" -r 'exit(phpversion("swoole") === $argv[1] ? 0 : 1);' "$version" >/dev/null 2>&1
}
if [ -f "$dest/swoole.so" ] && [ "$(cat "$cache/.$tag.commit" 2>/dev/null)" = "$commit" ] && loads; then
    echo "$dest/swoole.so ($tag, commit $commit, already built, $((SECONDS - started)) s)"
    exit 0
fi

# What the build needs: phpize (php-dev), a C++ compiler, make, and OpenSSL's headers found by
# pkg-config (Swoole 6 requires libssl; the rest of config.m4 is optional and left off).
missing=()
command -v "$phpize" >/dev/null && command -v "$php_config" >/dev/null || missing+=(php-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists libssl 2>/dev/null || missing+=(libssl-dev)
if ((${#missing[@]})); then
    echo "installing with apt-get: ${missing[*]}"
    command -v apt-get >/dev/null || die "missing ${missing[*]}, and no apt-get to install them"
    apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed (apt-get update first?)"
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.$tag.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$tmp/build.log
git archive --format=tar "$commit" | tar -x -C "$tmp/"
echo "building Swoole $tag (commit $commit) against $("$php_config" --version), make -j$(nproc)"
(
    cd "$tmp"
    "$phpize" &&
        ./configure --with-php-config="$(command -v "$php_config")" --enable-swoole --disable-brotli &&
        make -j"$(nproc)"
) >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "the build of $tag failed (the last lines of its log above)"; }
[ -f "$tmp/modules/swoole.so" ] || die "the build of $tag made no modules/swoole.so"

rm -rf "$dest"
mkdir -p "$dest"
cp "$tmp/modules/swoole.so" "$dest/swoole.so"
# without its debugging information: 4 MB instead of 50
command -v strip >/dev/null && strip --strip-debug "$dest/swoole.so"
loads || die "$dest/swoole.so does not load in $php as Swoole $version"
# The commit is noted beside the build.
echo "$commit" > "$cache/.$tag.commit"
echo "$dest/swoole.so ($tag, commit $commit, built in $((SECONDS - started)) s)"
