#!/usr/bin/env bash
# fetch_llama_cpp.sh: obtains llama.cpp's sources for the llama.cpp benchmark
# (run_llama_cpp.sh) and packs the parts its CUDA build needs into one
# tarball that the device tool can carry (.llama/ is git-ignored; nothing
# fetched is ever committed).
#
# Where the sources come from, first that works:
#   $1 / LLAMA_SRC   an existing llama.cpp checkout
#   LLAMA_GIT        a git URL (+ LLAMA_REF, a tag or commit): git clone --depth 1
#   PyPI             the llama-cpp-python sdist, which vendors llama.cpp
#                    (LLAMA_PYPI_VERSION, default 0.3.36: llama.cpp of 2026-10)
#
# Output: .llama/llama-src.tar.xz (about 5 MiB) and .llama/SOURCE (where it
# came from). Usage: tests/bench/llama_cpp/fetch_llama_cpp.sh [LLAMA_SRC]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
DEST=$ROOT/.llama
SRC=${1:-${LLAMA_SRC:-}}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$DEST"
if [[ -n $SRC ]]; then
  origin="local tree $SRC"
elif [[ -n ${LLAMA_GIT:-} ]]; then
  git clone -q --depth 1 ${LLAMA_REF:+--branch "$LLAMA_REF"} "$LLAMA_GIT" "$TMP/llama.cpp"
  SRC=$TMP/llama.cpp
  origin="$LLAMA_GIT ${LLAMA_REF:-HEAD} ($(git -C "$SRC" rev-parse HEAD))"
else
  ver=${LLAMA_PYPI_VERSION:-0.3.36}
  python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$TMP" \
    || { echo "fetch_llama_cpp: pip download of llama-cpp-python==$ver failed" >&2; exit 1; }
  tar xzf "$TMP"/llama_cpp_python-"$ver".tar.gz -C "$TMP"
  SRC=$TMP/llama_cpp_python-$ver/vendor/llama.cpp
  origin="PyPI llama-cpp-python==$ver (vendor/llama.cpp)"
fi
[[ -f $SRC/ggml/src/ggml-cuda/norm.cu ]] || { echo "fetch_llama_cpp: $SRC is no llama.cpp tree" >&2; exit 1; }
# Models, docs, UIs and the other GPU backends are not needed by a CUDA build.
(cd "$SRC" && tar --exclude=./models --exclude=./docs --exclude=./media --exclude=./benches \
  --exclude=./.git --exclude=./app --exclude=./tools/ui --exclude='./tools/server/public*' \
  --exclude=./examples/llama.android --exclude=./examples/llama.swiftui \
  --exclude=./ggml/src/ggml-vulkan --exclude=./ggml/src/ggml-sycl --exclude=./ggml/src/ggml-metal \
  --exclude=./ggml/src/ggml-opencl --exclude=./ggml/src/ggml-cann --exclude=./ggml/src/ggml-webgpu \
  --exclude=./ggml/src/ggml-musa --exclude=./ggml/src/ggml-hexagon --exclude=./ggml/src/ggml-zdnn \
  -cJf "$DEST/llama-src.tar.xz" .)
echo "$origin" > "$DEST/SOURCE"
echo "fetch_llama_cpp: $(du -h "$DEST/llama-src.tar.xz" | cut -f1) in $DEST/llama-src.tar.xz from $origin"
