#!/usr/bin/env bash
# Renders every Mermaid block of the documentation with mermaid-cli (mmdc), the renderer of
# Mermaid's own project, so that a diagram that GitHub would show as an error is found here:
# each ```mermaid block of README.md and docs/**/*.md (or of the files named) is rendered to SVG
# in a temporary directory, and the run fails naming FILE:LINE of every block that does not
# render, with mmdc's reason.
#
#   bash tests/mermaid.sh [FILE...]
#
# mermaid-cli is installed once from the npm registry, at a pinned version (Mermaid 11, as on
# GitHub; mermaid-cli 12 needs Node 22), into a cache outside the repository:
# $GANESHA_SHM_MERMAID_CACHE/VERSION (default /var/cache/ganesha-shm-ci/mermaid-cli). Puppeteer's
# own browser is not downloaded: mmdc drives Debian's chromium (.ci/install-deps installs it).
# Needs node and npm (Debian's nodejs and npm).
set -euo pipefail
cd "$(dirname "$0")/.."

version=11.17.0
cache=${GANESHA_SHM_MERMAID_CACHE:-/var/cache/ganesha-shm-ci/mermaid-cli}/$version
mmdc=$cache/node_modules/.bin/mmdc
chromium=${GANESHA_SHM_CHROMIUM:-/usr/bin/chromium}

say() { printf 'mermaid: %s\n' "$*"; }

for tool in node npm; do
    command -v "$tool" >/dev/null || { say "$tool is missing (apt-get install nodejs npm)"; exit 1; }
done
[ -x "$chromium" ] || { say "$chromium is missing (apt-get install chromium; .ci/install-deps installs it)"; exit 1; }

if [ ! -x "$mmdc" ]; then
    started=$(date +%s)
    say "installing @mermaid-js/mermaid-cli@$version into $cache"
    # Into a directory of its own, moved into place once complete: an interrupted install
    # leaves no cache that looks whole.
    rm -rf "$cache.new"
    mkdir -p "$cache.new"
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$cache.new" --no-audit --no-fund --no-save \
        --loglevel=error "@mermaid-js/mermaid-cli@$version" >&2
    rm -rf "$cache"
    mv "$cache.new" "$cache"
    say "installed in $(($(date +%s) - started)) s"
fi

work=$(mktemp -d /tmp/ganesha-shm-mermaid.XXXXXX)
trap 'rm -rf "$work"' EXIT
# No sandbox: CI runs as root, where Chromium's sandbox refuses to start.
printf '{"executablePath": "%s", "args": ["--no-sandbox", "--disable-gpu"]}\n' "$chromium" >"$work/puppeteer.json"
mkdir -p "$work/home"

if (($#)); then
    files=("$@")
else
    files=()
    [ -f README.md ] && files+=(README.md)
    if [ -d docs ]; then
        while IFS= read -r -d '' file; do files+=("$file"); done < <(find docs -name '*.md' -type f -print0 | sort -z)
    fi
fi

# Each block to a file of its own, named by its number; blocks.tsv: number, FILE:LINE of its
# opening fence. Fences of ``` or ~~~, indented by up to 3 spaces, closed by a fence of the same
# character at least as long (CommonMark).
blocks=0
for file in "${files[@]}"; do
    [ -f "$file" ] || { say "$file: no such file"; exit 1; }
    # (No regular expression intervals: Debian's mawk has none.)
    blocks=$(awk -v file="$file" -v dir="$work" -v n="$blocks" '
        # The fence a line starts with ("" if none): 3 or more ` or ~ after up to 3 spaces.
        function fence_of(line,    c, i) {
            sub(/^ ? ? ?/, "", line)
            c = substr(line, 1, 1)
            if (c != "`" && c != "~") return ""
            for (i = 1; substr(line, i, 1) == c; i++) {}
            return i > 3 ? substr(line, 1, i - 1) : ""
        }
        open == "" && fence_of($0) != "" {
            open = fence_of($0)
            info = $0; sub(/^ *[`~]+[ \t]*/, "", info); sub(/[ \t].*$/, "", info)
            if (info == "mermaid") { n++; out = dir "/" n ".mmd"; printf "" > out; printf "%d\t%s:%d\n", n, file, NR >> (dir "/blocks.tsv") }
            else out = ""
            next
        }
        open != "" {
            f = fence_of($0)
            rest = $0; sub(/^ *[`~]+/, "", rest)
            if (f != "" && substr(f, 1, 1) == substr(open, 1, 1) && length(f) >= length(open) && rest ~ /^[ \t]*$/) {
                if (out != "") close(out)
                open = ""; out = ""
                next
            }
            if (out != "") print > out
        }
        END { print n }
    ' "$file")
done

if ((blocks == 0)); then
    say "no Mermaid block in ${files[*]}"
    exit 0
fi

started=$(date +%s)
failed=0
while IFS=$'\t' read -r n where; do
    if ! HOME="$work/home" "$mmdc" --quiet -p "$work/puppeteer.json" -i "$work/$n.mmd" -o "$work/$n.svg" >"$work/$n.log" 2>&1 \
        || ! grep -q '<svg' "$work/$n.svg" 2>/dev/null; then
        failed=$((failed + 1))
        # mmdc's reason without its stack trace (the lines "at ..." and those naming a script).
        reason=$(grep -v -E '^[[:space:]]*at |\((https?|file)://' "$work/$n.log" | grep -v '^[[:space:]]*$' | head -n 4 || true)
        echo "$where: the Mermaid block does not render"
        sed 's/^/    /' <<<"${reason:-mmdc wrote no SVG}"
    fi
done <"$work/blocks.tsv"
say "$blocks blocks in ${#files[@]} files, $failed failed, in $(($(date +%s) - started)) s"
((failed == 0))
