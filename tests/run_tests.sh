#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): builds if
# needed, then runs every ctest test. GPU tests skip, and say so, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
BUILD_DIR="${KERNCAP_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
