#!/usr/bin/env bash
# build_fuzzers.sh: builds the libFuzzer targets of tests/fuzz in build-fuzz/
# (a separate clang build: every kerncap library compiled with
# -fsanitize=address,undefined,fuzzer-no-link and -fno-sanitize-recover, so
# undefined behaviour stops the fuzzer like a crash; the fuzzers linked with
# -fsanitize=fuzzer,address,undefined). The project build (GCC) is untouched.
#
#   tests/fuzz/build_fuzzers.sh [--seeds]    # --seeds: rewrite tests/fuzz/corpus
#
# Needs clang++ with libFuzzer (clang-15 here) and the project's dependencies.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${KERNCAP_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cxx="${KERNCAP_FUZZ_CXX:-$(command -v clang++-15 || command -v clang++)}"
cc="${KERNCAP_FUZZ_CC:-$(command -v clang-15 || command -v clang)}"
jobs="${KERNCAP_FUZZ_JOBS:-2}"
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DKERNCAP_BUILD_FUZZERS=ON -DKERNCAP_BUILD_TESTS=OFF -DKERNCAP_BUILD_BENCH=OFF \
  -DKERNCAP_WERROR=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  "${launcher[@]}" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
ninja -C "$build" -j"$jobs" manifest_fuzzer kcap_file_fuzzer agent_link_fuzzer \
  reference_import_fuzzer cubin_fuzzer make_seed_corpus make_cubin_seeds
if [[ "${1:-}" == "--seeds" ]]; then
  rm -rf "$root/tests/fuzz/corpus"
  "$build/fuzz/make_seed_corpus" "$root/tests/fuzz/corpus"
fi
echo "fuzzers in $build/fuzz"
