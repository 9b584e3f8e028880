#!/usr/bin/env bash
# Exports Ganesha's releases from a git directory of ackintosh/ganesha into a cache outside the
# repository, where .ci/run finds them (and where GANESHA_DIR can point). The PHP package
# registry is not needed: any clone of ackintosh/ganesha with its release tags will do.
#
#   bash tests/ganesha.sh GIT_DIR [TAG ...]     (default tags: 4.0.0 3.2.0)
#
# GIT_DIR is a clone's .git, or a bare repository. The exports go to
# $GANESHA_SHM_GANESHA_CACHE/<tag> (default /var/cache/ganesha-shm-ci/ganesha/<tag>), one folder
# per release, unmodified; each is checked to hold src/Ganesha.php. A release already exported
# is left as it is, so a second run changes nothing. Prints each folder and the commit it holds.
set -euo pipefail

cache=${GANESHA_SHM_GANESHA_CACHE:-/var/cache/ganesha-shm-ci/ganesha}

die() { echo "ganesha.sh: $*" >&2; exit 1; }

case "${1:-}" in
    ''|-h|--help)
        sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
        [ -n "${1:-}" ] && exit 0
        exit 2 ;;
esac
git_dir=$1
shift
tags=("$@")
((${#tags[@]})) || tags=(4.0.0 3.2.0)

[ -d "$git_dir" ] || die "$git_dir: no such directory"
# A clone's top is accepted too.
[ -d "$git_dir/.git" ] && git_dir=$git_dir/.git
command git --git-dir="$git_dir" rev-parse --git-dir >/dev/null 2>&1 || die "$git_dir: not a git directory"

git() { command git --git-dir="$git_dir" "$@"; }

for tag in "${tags[@]}"; do
    [[ $tag =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$tag: not a release tag (expected X.Y.Z)"
    commit=$(git rev-parse -q --verify "refs/tags/$tag^{commit}") ||
        die "$git_dir has no tag $tag (is it a clone of ackintosh/ganesha with its tags? git fetch --tags)"
    # Ganesha's repository is told by its composer.json and its main class at that tag.
    git cat-file -e "$commit:src/Ganesha.php" 2>/dev/null &&
        git show "$commit:composer.json" 2>/dev/null | grep -q '"name": *"ackintosh/ganesha"' ||
        die "$git_dir: tag $tag holds no ackintosh/ganesha (no src/Ganesha.php, or composer.json names another package)"

    dest=$cache/$tag
    if [ -f "$dest/src/Ganesha.php" ] && [ "$(cat "$cache/.$tag.commit" 2>/dev/null)" = "$commit" ]; then
        echo "$dest ($tag, commit $commit, already exported)"
        continue
    fi
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.$tag.XXXXXX")
    git archive --format=tar "$commit" | tar -x -C "$tmp"
    [ -f "$tmp/src/Ganesha.php" ] || { rm -rf "$tmp"; die "the export of $tag holds no src/Ganesha.php"; }
    chmod 755 "$tmp"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    # The commit is noted beside the export, which stays as the release has it.
    echo "$commit" > "$cache/.$tag.commit"
    echo "$dest ($tag, commit $commit)"
done
