#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): builds with the
# tests and benchmarks turned on, whatever an earlier build (the quickstart's
# quick one, KERNCAP_BUILD_TESTS=OFF) left in the cache, then runs every ctest
# test. It fails when no test ran: a test command that runs nothing must not
# pass. GPU tests skip, and say so, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# The -D flags make deploy/build.sh reconfigure, so a cached OFF is replaced.
bash deploy/build.sh -DKERNCAP_BUILD_TESTS=ON -DKERNCAP_BUILD_BENCH=ON
BUILD_DIR="${KERNCAP_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j"$(nproc)" "$@"
