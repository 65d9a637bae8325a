#!/usr/bin/env bash
# slicer_layout_test.sh BUILD_DIR STATIC: the slicer as the GPU bundle carries
# it (stage_slicer.sh into a temporary folder, away from the build tree):
#   - STATIC=1: it needs no shared library but glibc's and libstdc++/libgcc_s
#     (no libclang/libLLVM, nor the zlib/terminfo/libxml2/z3/libedit/libffi an
#     LLVM link may pull in), and it slices a small CUDA unit with the headers
#     staged beside it; where a mount namespace can be made (root), with
#     /usr/lib/llvm-15 and /usr/include/clang hidden, as on a machine without
#     clang (else it says so and slices with them in place);
#   - without lib/kerncap-clang it refuses (exit 3), naming the path, and so
#     it does for a --resource-dir without clang's headers;
#   - STATIC=0: stage_slicer.sh refuses the shared-library build, saying why.
# Exit status: 0 passed; 1 failed; 77 skipped (no CUDA headers for the slice).
set -uo pipefail
BUILD=${1:?usage: slicer_layout_test.sh BUILD_DIR STATIC}
STATIC=${2:?usage: slicer_layout_test.sh BUILD_DIR STATIC}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/kerncap-slicer-layout-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ $STATIC != 1 ]]; then
  if bash "$HERE/stage_slicer.sh" "$BUILD" "$T/stage" 2> "$T/err"; then
    fail "stage_slicer.sh staged a slicer linked against clang's shared libraries"
  fi
  grep -q 'KERNCAP_SLICER_STATIC=OFF' "$T/err" || fail "refusal does not say why: $(cat "$T/err")"
  echo "PASS: the shared-library slicer is refused ($(cat "$T/err"))"
  exit 0
fi

bash "$HERE/stage_slicer.sh" "$BUILD" "$T/stage" || fail "stage_slicer.sh failed"
S=$T/stage/bin/kerncap-cuda-slice
[[ -x $S && -f $T/stage/lib/kerncap-clang/include/__clang_cuda_runtime_wrapper.h ]] ||
  fail "stage_slicer.sh did not lay out bin/ and lib/kerncap-clang/include"
deps=$(ldd "$S" | awk '{print $1}')
echo "ldd: $(echo "$deps" | tr '\n' ' ')"
allowed='^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
extra=$(echo "$deps" | grep -Ev "$allowed" | tr '\n' ' ')
[[ -z $extra ]] || fail "the static slicer still needs: $extra"

CUDA=""
for d in /usr/local/cuda /usr/local/cuda-*; do
  [[ -f $d/include/cuda_runtime.h ]] && { CUDA=$d; break; }
done
[[ -n $CUDA ]] || { echo "SKIP: no CUDA toolkit headers to slice against"; exit 77; }

mkdir -p "$T/src/include"
cat > "$T/src/include/scale.cuh" << 'EOF'
#pragma once
#include <cstdint>
#define KC_FACTOR 3
__device__ inline float kc_scale(float v) { return v * KC_FACTOR; }
__device__ inline float kc_unused(float v) { return v - 1; }
EOF
cat > "$T/src/k.cu" << 'EOF'
#include "scale.cuh"
__global__ void kc_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = kc_scale(x[i]) + static_cast<float>(sizeof(std::int64_t));
}
__global__ void kc_other(float* x) { x[0] = kc_unused(x[0]); }
EOF
args=(--symbol=_Z9kc_kernelPfi --root="$T/src" --out="$T/kernel.cu" --report="$T/slice.json"
      --cuda-path="$CUDA" --cuda-arch-macro=900 -- -std=c++17 -I"$T/src/include" "$T/src/k.cu")
# Runs "$@" with clang's system folders hidden behind an empty one.
mkdir -p "$T/empty"
without_clang() {
  unshare -m bash -c 'for d in /usr/lib/llvm-15 /usr/include/clang; do
                        [[ -d $d ]] && { mount --bind "$0" "$d" || exit 99; }
                      done; exec "$@"' "$T/empty" "$@"
}
run=()
if without_clang true 2> /dev/null; then
  run=(without_clang)
  echo "slicing with /usr/lib/llvm-15 and /usr/include/clang hidden"
else
  echo "no mount namespace here (not root?): slicing with the system's clang folders in place"
fi
(cd "$T" && "${run[@]}" "$S" "${args[@]}") > "$T/out" 2>&1 || fail "the staged slicer failed: $(tail -5 "$T/out")"
grep -q '"kernel": "kc_kernel"' "$T/slice.json" || fail "report: $(cat "$T/slice.json")"
grep -q '"parse_errors": 0' "$T/slice.json" || fail "parse errors: $(cat "$T/slice.json"; tail -5 "$T/out")"
grep -q 'kc_scale' "$T/kernel.cu" && ! grep -q 'kc_unused' "$T/kernel.cu" ||
  fail "the unit is not the kernel's slice: $(cat "$T/kernel.cu")"
echo "PASS: the staged slicer sliced a unit: $(cat "$T/slice.json")"

# Without the headers beside it: a refusal naming where it looked.
mv "$T/stage/lib/kerncap-clang" "$T/moved"
(cd "$T" && "$S" "${args[@]}") > "$T/out" 2>&1
rc=$?
[[ $rc == 3 ]] || fail "without lib/kerncap-clang: exit $rc, want 3: $(tail -3 "$T/out")"
grep -q "kerncap-cuda-slice: clang's resource headers are missing: no .*/stage/bin/../lib/kerncap-clang/include/__clang_cuda_runtime_wrapper.h" "$T/out" ||
  fail "the refusal does not name the path: $(cat "$T/out")"
(cd "$T" && "$S" --resource-dir="$T/empty" "${args[@]}") > "$T/out" 2>&1
rc=$?
[[ $rc == 3 ]] && grep -q "no $T/empty/include/__clang_cuda_runtime_wrapper.h" "$T/out" ||
  fail "--resource-dir without headers: exit $rc: $(cat "$T/out")"
echo "PASS: without clang's headers it refuses: $(tail -1 "$T/out")"
