#!/usr/bin/env bash
# stage_slicer.sh BUILD_DIR DEST: copies kerncap-cuda-slice into DEST/bin and
# clang's resource headers into DEST/lib/kerncap-clang/include, the layout the
# slicer finds them in (kernel_slicer_main.cc, ResourceDir). DEST/bin is where
# the generator looks for the slicer: beside the running kerncapd/kerncapctl
# (reproducer/generator/tool_runner.cc, ResolveTools). deploy/gpu/bundle.sh
# stages the GPU bundle with it; slicer_layout_test.sh checks the result.
#
# The whole include folder is copied (13 MB, ~1 MB gzip'd). A run on llama.cpp's
# norm.cu reads 19 of its files (the __clang_cuda_*.h wrappers,
# cuda_wrappers/{algorithm,new}, stddef.h, stdint.h, float.h, limits.h,
# stdarg.h, stdbool.h); which others a unit reads depends on what it includes
# (libstdc++'s <random> pulls the x86 intrinsics), so none is left out.
#
# A slicer linked against clang's shared libraries (KERNCAP_SLICER_STATIC=OFF)
# is refused: libclang-cpp.so.15 + libLLVM-15.so (178 MB, 53 MB gzip'd) do not fit the
# device tool's 64 MiB carry.
# Exit status: 0 staged; 1 nothing staged (the reason on stderr).
set -euo pipefail
BUILD=${1:?usage: stage_slicer.sh BUILD_DIR DEST}
DEST=${2:?usage: stage_slicer.sh BUILD_DIR DEST}
SLICER=$BUILD/bin/kerncap-cuda-slice
HEADERS=$BUILD/lib/kerncap-clang/include
fail() { echo "stage_slicer.sh: $*" >&2; exit 1; }
[[ -x $SLICER ]] || fail "no $SLICER (built when libclang-15-dev is installed)"
[[ -f $HEADERS/__clang_cuda_runtime_wrapper.h ]] ||
  fail "no clang resource headers at $HEADERS (reconfigure $BUILD)"
shared=$(ldd "$SLICER" | awk '/libclang|libLLVM/ {print $1}' | tr '\n' ' ')
[[ -z $shared ]] ||
  fail "$SLICER needs ${shared}(configured with KERNCAP_SLICER_STATIC=OFF); reconfigure with -DKERNCAP_SLICER_STATIC=ON (needs libclang-15-dev, llvm-15-dev, zlib1g-dev, libncurses-dev)"
mkdir -p "$DEST/bin" "$DEST/lib/kerncap-clang"
cp "$SLICER" "$DEST/bin/"
rm -rf "$DEST/lib/kerncap-clang/include"
cp -rL "$HEADERS" "$DEST/lib/kerncap-clang/include"
