#!/usr/bin/env bash
# Model-checks the table's and the store's protocols with loom (crates/core/src/loom_tests.rs): every
# interleaving of 2-3 threads' atomic steps, each thread with its own clock, up to
# LOOM_MAX_PREEMPTIONS preemptions (default 2), with one thread stopped for ever at each of its
# steps in turn (checked after each of its writes, which covers the loads between them: see
# crates/core/src/sync.rs). Prints the interleavings explored; exits non-zero on any failure.
#
# Uses the host's cargo and builds into target/loom (RUSTFLAGS="--cfg loom" rebuilds every
# crate, so it gets a target directory of its own). Installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export RUSTFLAGS="--cfg loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_LOOM:-target/loom}"
started=$SECONDS
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The scenarios are independent models: one per CPU at a time.
cargo test --release -p ganesha-shm-core --lib loom_tests -- --nocapture --test-threads "$(nproc)" --skip zz_report 2>&1 | tee "$log" ||
    status=$?
total=$(sed -nE 's/^.*model-check: .*: ([0-9]+) interleavings.*$/\1/p' "$log" | awk '{ sum += $1 } END { print sum + 0 }')
echo "model-check: $total interleavings in all, LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, $((SECONDS - started)) s, $([ "$status" = 0 ] && echo passed || echo FAILED)"
exit "$status"
