#!/usr/bin/env bash
# Configures and builds kerncap into ./build (Release with debug info).
#   KERNCAP_QUICK=1  no tests and no benchmarks in the configuration.
#   KERNCAP_TARGETS="kerncapd kerncapctl ..."  build only these targets (and
#                    what they need) instead of everything configured; the
#                    quickstart builds just what its demo runs this way.
#   KERNCAP_BUILD_DIR  the build folder (default: build).
# Extra arguments go to cmake's configure step (-DKERNCAP_BUILD_TESTS=OFF ...).
# A later run without KERNCAP_TARGETS builds the rest into the same folder,
# reusing every object already built.
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
TARGETS=()
if [ -n "${KERNCAP_TARGETS:-}" ]; then
  read -r -a names <<<"$KERNCAP_TARGETS"
  TARGETS=(--target "${names[@]}")
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" "${TARGETS[@]}"
