#!/usr/bin/env bash
# Builds the extension and runs the demo: a Ganesha circuit in the default (anonymous) segment,
# shared by two forked workers, that trips and recovers. Needs Ganesha: run `composer install`
# first, or set GANESHA_DIR to an exported ackintosh/ganesha.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/install-deps

if [ ! -f vendor/autoload.php ] && [ -z "${GANESHA_DIR:-}" ] && command -v composer >/dev/null 2>&1; then
    composer install --no-interaction --quiet || true
fi
cargo build --release
# Where cargo put it: CARGO_TARGET_DIR, as tests/run.sh honours it, or target/.
exec php -d "extension=${CARGO_TARGET_DIR:-$PWD/target}/release/libganesha_shm.so" examples/demo.php
