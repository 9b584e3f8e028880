#!/usr/bin/env bash
# Runs every test: the Rust unit tests, then the PHPUnit suites against the built extension.
# The Ganesha suite runs when Ganesha is in vendor/ (composer install) or GANESHA_DIR points at
# an exported ackintosh/ganesha; otherwise it is skipped with a message saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/install-deps

cargo build --release
cargo test --release

export GANESHA_SHM_EXT="$PWD/target/release/libganesha_shm.so"
phpunit=/usr/bin/phpunit
[ -x vendor/bin/phpunit ] && phpunit=vendor/bin/phpunit
php -d "extension=$GANESHA_SHM_EXT" "$phpunit" -c phpunit.xml.dist "$@"
