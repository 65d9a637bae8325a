#!/usr/bin/env bash
# Configures and builds kerncap into ./build (Release with debug info).
#   KERNCAP_QUICK=1  the quickstart build: no tests and no benchmarks, the
#                    binaries only (about a third of the full build's work).
# Extra arguments go to cmake's configure step (-DKERNCAP_BUILD_TESTS=OFF ...).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${KERNCAP_BUILD_DIR:-build}"
ARGS=("$@")
if [ "${KERNCAP_QUICK:-0}" = 1 ]; then
  ARGS+=(-DKERNCAP_BUILD_TESTS=OFF -DKERNCAP_BUILD_BENCH=OFF)
fi
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ ${#ARGS[@]} -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ARGS[@]}"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
