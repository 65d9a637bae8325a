#!/usr/bin/env bash
# stage_cuda12.sh: stages a CUDA 12 runtime application and CUDA 12's CUPTI
# for the agent's CUDA 12 GPU cases (gpu_e2e_test cuda12_*), from the
# nvidia-*-cu12 Python wheels; the GPU machine has no network, so
# deploy/gpu/bundle.sh runs this here and carries the result:
#
#   DEST/cuda12/bin/cuda12_axpy                  agent/cuda/gpu_tests/cuda12, g++ + the
#                                                wheel's CUDA 12 headers, RUNPATH to:
#   DEST/cuda12/bin/kc12_axpy.cubin              kc12_axpy.ptx through the wheel's ptxas
#   DEST/cuda12/nvidia/cuda_runtime/lib/libcudart.so.12   (0.7 MiB)
#   DEST/cuda12/nvidia/cuda_cupti/lib/libcupti.so.12      (7.6 MiB, ~2.3 MiB packed)
#
# the pip wheels' own layout (nvidia/<package>/lib), which the agent searches
# beside a loaded libcudart (agent/cuda/cupti_api.h). The wheels are
# downloaded once with pip into .whl/cuda12/ (or $KERNCAP_CUDA12_WHEELS):
# nvidia-cuda-runtime-cu12, nvidia-cuda-cupti-cu12, nvidia-cuda-nvcc-cu12
# (ptxas only: the wheel has no nvcc driver), 12.8, ~51 MiB together; only the
# files above travel.
#
# Usage: deploy/gpu/stage_cuda12.sh DEST
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${1:?usage: stage_cuda12.sh DEST}
WHEELS=${KERNCAP_CUDA12_WHEELS:-$ROOT/.whl/cuda12}
VERSION=${KERNCAP_CUDA12_VERSION:-12.8.*}
SRC=$ROOT/agent/cuda/gpu_tests/cuda12

mkdir -p "$WHEELS"
for pkg in nvidia-cuda-runtime-cu12 nvidia-cuda-cupti-cu12 nvidia-cuda-nvcc-cu12; do
  stem=${pkg//-/_}
  if ! compgen -G "$WHEELS/${stem}-*.whl" > /dev/null; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 --python-version 3.11 -d "$WHEELS" "$pkg==$VERSION"
  fi
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for w in "$WHEELS"/nvidia_cuda_runtime_cu12-*.whl "$WHEELS"/nvidia_cuda_cupti_cu12-*.whl \
         "$WHEELS"/nvidia_cuda_nvcc_cu12-*.whl; do
  python3 -m zipfile -e "$w" "$WORK/"
done
NV=$WORK/nvidia
chmod +x "$NV"/cuda_nvcc/bin/ptxas

OUT=$DEST/cuda12
rm -rf "$OUT"
mkdir -p "$OUT"/bin "$OUT"/nvidia/cuda_runtime/lib "$OUT"/nvidia/cuda_cupti/lib
cp "$NV"/cuda_runtime/lib/libcudart.so.12 "$OUT"/nvidia/cuda_runtime/lib/
cp "$NV"/cuda_cupti/lib/libcupti.so.12 "$OUT"/nvidia/cuda_cupti/lib/
"$NV"/cuda_nvcc/bin/ptxas -arch=sm_90 -o "$OUT"/bin/kc12_axpy.cubin "$SRC"/kc12_axpy.ptx
# -l:libcudart.so.12: the wheel has no unversioned name, and a plain -lcudart
# would find the host's CUDA 13 runtime (cuda12_axpy checks which one it got).
c++ -O2 -std=c++17 -I"$NV"/cuda_runtime/include -o "$OUT"/bin/cuda12_axpy "$SRC"/cuda12_axpy.cc \
  -L"$NV"/cuda_runtime/lib -l:libcudart.so.12 \
  -Wl,--enable-new-dtags,-rpath,'$ORIGIN/../nvidia/cuda_runtime/lib'
strip --strip-all "$OUT"/bin/cuda12_axpy
strip --strip-unneeded "$OUT"/nvidia/*/lib/*.so.12
echo "stage_cuda12.sh: $(du -sh "$OUT" | cut -f1) in $OUT ($(basename "$(ls "$WHEELS"/nvidia_cuda_runtime_cu12-*.whl)"))"
