#!/usr/bin/env bash
# Runs every test: the Rust unit tests, then the PHPUnit suites against the built extension.
# The Ganesha suite runs when Ganesha is in vendor/ (composer install) or GANESHA_DIR points at
# an exported ackintosh/ganesha; otherwise it is skipped with a message saying so.
#
# Arguments go to PHPUnit (e.g. --testsuite native). The environment it honours:
#   CARGO_TARGET_DIR     where cargo builds (default target/)
#   PHP_CONFIG, PHP      the PHP to build against and run (default: php-config and php on PATH)
#   GANESHA_SHM_CARGO_TEST=0   skips `cargo test` and the fleet's simulation, for a second PHPUnit
#                        run over the same build; =extension runs the extension crate's alone (the
#                        other crates have no PHP in them: another PHP's run needs only that one);
#                        GANESHA_SHM_FLEET_SIM=0 skips the simulation alone
#   GANESHA_SHM_ZTS_PHP  the thread-safe PHP of tests/zts.sh (default /var/cache/ganesha-shm-ci/zts/current):
#                        when it is there, the extension is also built against it, into
#                        $CARGO_TARGET_DIR/zts, for the zts suite (GANESHA_SHM_ZTS_EXT); when it is
#                        not, the zts suite is skipped with a message saying how to build it
#   GANESHA_SHM_SWOOLE_CACHE, GANESHA_SHM_SWOOLE_TAG   where the swoole suite finds the swoole.so
#       tests/swoole.sh built (default /var/cache/ganesha-shm-ci/swoole, v6.2.2); without one,
#       the suite is skipped with a message saying so
# On PHPUnit 10 and later a deprecation, PHPUnit's own included, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/install-deps

php=${PHP:-php}
target_dir=${CARGO_TARGET_DIR:-$PWD/target}

cargo build --release
case ${GANESHA_SHM_CARGO_TEST:-1} in
    0) ;;
    extension) cargo test --release -p ganesha-shm ;;
    *) cargo test --release --workspace --exclude ganesha-shm-fleet-sim ;;
esac
# The fleet's simulation (tests/fleet-sim.sh, docs/development.md): the first 500 histories
# with every fault but clock steps and the first 200 with every fault (the seeds named break,
# open defects: they must go on breaking until fixed), and each defense switched off breaking a
# seed that holds with it on (--teeth).
if [[ ${GANESHA_SHM_CARGO_TEST:-1} != @(0|extension) ]] && [ "${GANESHA_SHM_FLEET_SIM:-1}" != 0 ]; then
    bash tests/fleet-sim.sh --steady-clocks --seeds 500 --known-broken 335,439
    bash tests/fleet-sim.sh --seeds 200 --known-broken 72,117,122,165,171
    bash tests/fleet-sim.sh --teeth
fi

export GANESHA_SHM_EXT="$target_dir/release/libganesha_shm.so"
zts_php=${GANESHA_SHM_ZTS_PHP:-/var/cache/ganesha-shm-ci/zts/current}
if [ -x "$zts_php/bin/php-config" ]; then
    PHP_CONFIG="$zts_php/bin/php-config" PHP="$zts_php/bin/php" CARGO_TARGET_DIR="$target_dir/zts" \
        cargo build --release -p ganesha-shm
    export GANESHA_SHM_ZTS_PHP="$zts_php" GANESHA_SHM_ZTS_EXT="$target_dir/zts/release/libganesha_shm.so"
fi
phpunit=/usr/bin/phpunit
[ -x vendor/bin/phpunit ] && phpunit=vendor/bin/phpunit
strict=()
major=$("$php" "$phpunit" --version | sed -nE 's/^PHPUnit ([0-9]+)\..*/\1/p')
if [ "${major:-0}" -ge 10 ]; then
    strict=(--display-deprecations --display-phpunit-deprecations --fail-on-deprecation --fail-on-phpunit-deprecation)
fi
# The fleet suite's Valkey tests need Debian's valkey-server, which Debian 12 does not ship.
groups=()
if ! command -v valkey-server >/dev/null; then
    groups=(--exclude-group valkey)
    echo "run.sh: the Valkey tests (group valkey) left out: they run where Debian ships valkey-server, as in the Debian 13 root of tests/matrix.sh php8.4"
fi
"$php" -d "extension=$GANESHA_SHM_EXT" "$phpunit" -c phpunit.xml.dist "${strict[@]}" "${groups[@]}" "$@"
