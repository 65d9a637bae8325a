#!/usr/bin/env bash
# bundle.sh: builds kerncap here (Debian 12) and packs everything the GPU
# tests need on the GPU machine (Ubuntu 24.04, CUDA 13 driver) into .bundle/:
#
#   .bundle/bin/         kerncapd kerncapctl kerncap-replay, kerncap-nvrtc (the
#                        minimal unit's NVRTC recompile; loads the machine's
#                        libnvrtc), and kerncap-cuda-slice (the CUDA
#                        reproducers' minimal unit; statically linked,
#                        reproducer/generator/slicer/stage_slicer.sh)
#   .bundle/lib/         libkerncap_agent.so, libkerncap_replay.so (the replay
#                        library the Triton reproducers' run.py loads) + every
#                        shared library the binaries need that the GPU machine
#                        may lack
#   .bundle/lib/cupti/   our libcupti.so.13, used only when the machine has none
#   .bundle/lib/kerncap-clang/include/  clang 15's resource headers, which
#                        kerncap-cuda-slice reads from ../lib/kerncap-clang
#   .bundle/gpu_tests/   the CUDA test programs (agent/cuda/gpu_tests)
#   .bundle/tests/       gpu_e2e_test, replay_gpu_test, serve_gpu_test, repro_gpu_test
#   .bundle/python_shim/ the Triton shim and its GPU cases
#   .bundle/python/      the PyTorch/Triton test scripts (tests/gpu/python), run
#                        with the GPU machine's python3
#   .bundle/python_client/ the Python client (src/, descriptors compiled), the
#                        quickstart notebook (examples/) and tests/gpu/run_notebook_gpu.py
#   .bundle/gpu_bench/   the GPU benchmarks (tests/bench/gpu)
#   .bundle/cuda12/      a CUDA 12 runtime application + CUDA 12 runtime and
#                        CUPTI from the pip wheels (stage_cuda12.sh)
#   .bundle/run_gpu_tests.sh   sets LD_LIBRARY_PATH and runs the GPU tests
#   .bundle/run_benchmarks.sh  runs the benchmarks (P1, P5, P8, memory)
#
# Left out on purpose: glibc (libc, libm, libpthread, libdl, librt, ld-linux),
# libstdc++ and libgcc_s (newer on Ubuntu 24.04, backward compatible), and
# libcuda (must be the machine's driver), and cuBLAS (50 MiB + a 500 MiB
# libcublasLt: over the 64 MiB the device tool carries; cublas_gemm dlopens
# the machine's copy, which run_gpu_tests.sh finds). RUNPATH is not enough for the
# libraries' own dependencies (RUNPATH is not inherited by a library's own
# DT_NEEDED lookups), hence LD_LIBRARY_PATH.
#
# The device tool carries .bundle-carry/bundle.tgz (the packed .bundle/); on
# the GPU machine:
#   tar xzf .bundle-carry/bundle.tgz && bash .bundle/run_gpu_tests.sh "$OUT"
#
# Usage: deploy/gpu/bundle.sh [BUILD_DIR]   (default: build-gpu, configured if absent)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-${KERNCAP_BUILD_DIR:-$ROOT/build-gpu}}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=$ROOT/.bundle
TARGETS=(kerncapd kerncapctl kerncap-replay kerncap-nvrtc kerncap_agent kerncap_gpu_programs
         gpu_e2e_test replay_gpu_test kerncap_gpu_benchmarks store_ingest_bench)

if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja
fi
# kerncap-replay serve's GPU test (reproducer/replay/serve), when it was configured.
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^serve_gpu_test:') ]] &&
  TARGETS+=(serve_gpu_test)
# The reproducer projects' GPU test (reproducer/generator), when configured.
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^repro_gpu_test:') ]] &&
  TARGETS+=(repro_gpu_test)
# The CUDA reproducers' minimal-unit slicer, when configured (libclang-15-dev).
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^kerncap-cuda-slice:') ]] &&
  TARGETS+=(kerncap-cuda-slice)
# The replay library behind the Triton reproducers' run.py (reproducer/replay/capi);
# the shim's GPU cases run those reproducers.
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^kerncap_replay_capi:') ]] &&
  TARGETS+=(kerncap_replay_capi)
# Its GPU tests (C++ and the ctypes binding's) and the capture fixture they write.
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^replay_capi_gpu_test:') ]] &&
  TARGETS+=(replay_capi_gpu_test replay_capi_fixture)
# Live substitution's GPU test (built by the full build only, so named here:
# a bundle from a fresh build dir must not silently lack it).
[[ -n $(ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^substitute_gpu_test:') ]] &&
  TARGETS+=(substitute_gpu_test)
ninja -C "$BUILD" -j"${JOBS:-2}" "${TARGETS[@]}"

rm -rf "$OUT"
mkdir -p "$OUT"/{bin,lib/cupti,gpu_tests,gpu_bench,tests,python}
cp "$BUILD"/bin/{kerncapd,kerncapctl,kerncap-replay,kerncap-nvrtc} "$OUT"/bin/
cp "$BUILD"/lib/libkerncap_agent.so "$OUT"/lib/
# The slicer beside kerncapd/kerncapctl, where the generator looks for it, and
# clang's headers where the slicer looks for them. Without it (not built, or
# linked against clang's shared libraries) every CUDA reproducer made on the
# GPU machine recompiles the whole unit and says why.
if [[ -x $BUILD/bin/kerncap-cuda-slice ]]; then
  bash "$ROOT"/reproducer/generator/slicer/stage_slicer.sh "$BUILD" "$OUT" ||
    echo "bundle.sh: warning: kerncap-cuda-slice not bundled; reproducers on the GPU machine get no minimal unit" >&2
else
  echo "bundle.sh: warning: no kerncap-cuda-slice in $BUILD (needs libclang-15-dev); reproducers on the GPU machine get no minimal unit" >&2
fi
[[ -f $BUILD/lib/libkerncap_replay.so ]] && cp "$BUILD"/lib/libkerncap_replay.so "$OUT"/lib/
if [[ -x $BUILD/tests/replay_capi_gpu_test ]]; then
  cp "$BUILD"/tests/{replay_capi_gpu_test,replay_capi_fixture} "$OUT"/tests/
  mkdir -p "$OUT"/python_capi
  cp "$ROOT"/reproducer/replay/capi/{kerncap_replay.py,kerncap_replay_gpu_test.py} "$OUT"/python_capi/
fi
find "$BUILD"/gpu_tests -maxdepth 1 -type f -perm -u+x -exec cp {} "$OUT"/gpu_tests/ \;
find "$BUILD"/gpu_bench -maxdepth 1 -type f -perm -u+x -exec cp {} "$OUT"/gpu_bench/ \;
# The store's own ingest rate on the GPU host (run_benchmarks.sh's P1d floor).
cp "$BUILD"/bin/store_ingest_bench "$OUT"/gpu_bench/
cp "$BUILD"/tests/{gpu_e2e_test,replay_gpu_test} "$OUT"/tests/
# Live substitution's GPU test and its variant cubins (not under gpu_tests/:
# strip would damage them).
if [[ -x $BUILD/tests/substitute_gpu_test ]]; then
  cp "$BUILD"/tests/substitute_gpu_test "$OUT"/tests/
  mkdir -p "$OUT"/substitute
  cp "$BUILD"/gpu_tests/substitute_*.cubin "$OUT"/substitute/
fi
[[ -x $BUILD/tests/serve_gpu_test ]] && cp "$BUILD"/tests/serve_gpu_test "$OUT"/tests/
[[ -x $BUILD/tests/repro_gpu_test ]] && cp "$BUILD"/tests/repro_gpu_test "$OUT"/tests/
cp "$ROOT"/tests/gpu/python/*.py "$OUT"/python/
# The Triton shim (python_shim) and its GPU cases, run with the machine's python3.
mkdir -p "$OUT"/python_shim/tests
cp -r "$ROOT"/python_shim/src "$OUT"/python_shim/
cp -r "$ROOT"/python_shim/tests/gpu "$OUT"/python_shim/tests/
find "$OUT"/python_shim -name __pycache__ -prune -exec rm -rf {} +
# The Python client (kerncap) with its compiled protocol descriptors (the GPU
# machine has no protoc), the quickstart notebook and its live-capture test
# (client/python/tests/gpu/run_notebook_gpu.py; nbclient & co. travel as wheels).
mkdir -p "$OUT"/python_client/tests
cp -r "$ROOT"/client/python/src "$ROOT"/client/python/examples "$OUT"/python_client/
cp -r "$ROOT"/client/python/tests/gpu "$OUT"/python_client/tests/
# tune_gpu_test.py reads the replay tests' kernel from its one source.
cp "$ROOT"/reproducer/replay/testing/add_one_ptx.h "$OUT"/python_client/tests/gpu/
find "$OUT"/python_client -name __pycache__ -prune -exec rm -rf {} +
find "$OUT"/python_client -name '*.egg-info' -prune -exec rm -rf {} +
rm -rf "$OUT"/python_client/src/kerncap/_generated/*.binpb
python3 - "$ROOT"/proto "$OUT"/python_client/src/kerncap/_generated <<'PY'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("_protoc", Path(sys.argv[2]).parent / "_protoc.py")
protoc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(protoc)
protoc.compile_descriptor_set(Path(sys.argv[1]), Path(sys.argv[2]) / protoc.DESCRIPTOR_FILE)
PY

# Shared libraries, resolved by ldd here.
skip_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcupti\.so|libcublas)'
declare -A seen=()
for f in "$OUT"/bin/* "$OUT"/lib/libkerncap_*.so "$OUT"/gpu_tests/* "$OUT"/gpu_bench/* \
         "$OUT"/tests/*; do
  while read -r name _ path _; do
    [[ -z ${name:-} || $name =~ $skip_re ]] && continue
    if [[ ${path:-} == "not" || -z ${path:-} ]]; then
      echo "bundle.sh: warning: $f needs $name, which ldd cannot resolve here" >&2
      continue
    fi
    [[ -n ${seen[$name]:-} ]] && continue
    seen[$name]=1
    cp -L "$path" "$OUT/lib/$name"
  done < <(ldd "$f" | awk '/=>/ {print $1, $2, $3, $4}')
done

# CUPTI must match the driver's major version (13 for driver 580); carried as
# a fallback, used only when the machine has no libcupti.so.13 of its own.
CUPTI=""
for c in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
         /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13; do
  [[ -e $c ]] && { CUPTI=$c; break; }
done
if [[ -n $CUPTI ]]; then
  cp -L "$CUPTI" "$OUT"/lib/cupti/libcupti.so.13
else
  echo "bundle.sh: warning: no libcupti.so.13 here; the GPU machine must provide it" >&2
fi

# Debug info (RelWithDebInfo) would make the bundle ~170 MiB; the device
# tool carries at most 64 MiB.
find "$OUT"/bin "$OUT"/gpu_tests "$OUT"/gpu_bench "$OUT"/tests -type f -exec strip --strip-all {} +
find "$OUT"/lib -type f -name '*.so*' -exec strip --strip-unneeded {} +

# A CUDA 12 runtime application and CUDA 12's CUPTI from the pip wheels, for
# gpu_e2e_test's cuda12_* cases (~8 MiB, ~3 MiB packed; the wheels are
# downloaded once into .whl/cuda12/). KERNCAP_BUNDLE_CUDA12=0 leaves them out
# (the cases then skip).
if [[ ${KERNCAP_BUNDLE_CUDA12:-1} != 0 ]]; then
  "$ROOT"/deploy/gpu/stage_cuda12.sh "$OUT" ||
    echo "bundle.sh: warning: CUDA 12 cases not staged (stage_cuda12.sh failed); they will skip" >&2
fi

cp "$ROOT"/deploy/gpu/run_gpu_tests.sh "$OUT"/run_gpu_tests.sh
chmod +x "$OUT"/run_gpu_tests.sh
cp "$ROOT"/deploy/gpu/run_benchmarks.sh "$OUT"/run_benchmarks.sh
chmod +x "$OUT"/run_benchmarks.sh
echo "bundle.sh: $(find "$OUT"/lib -maxdepth 1 -name '*.so*' | wc -l) libraries, $(du -sh "$OUT" | cut -f1) in $OUT"
[[ -x $OUT/bin/kerncap-cuda-slice ]] &&
  echo "bundle.sh: kerncap-cuda-slice $(du -k "$OUT"/bin/kerncap-cuda-slice | cut -f1) KiB + clang headers $(du -sk "$OUT"/lib/kerncap-clang | cut -f1) KiB"
# What travels to the GPU machine: one gzip'd tar (binaries compress ~3x), so
# the bundle may exceed the device tool's 64 MiB carry limit unpacked. On the
# GPU machine: tar xzf .bundle-carry/bundle.tgz (it unpacks to .bundle/).
CARRY=$ROOT/.bundle-carry
rm -rf "$CARRY"
mkdir -p "$CARRY"
tar czf "$CARRY"/bundle.tgz -C "$ROOT" .bundle
size_kib=$(du -sk "$CARRY" | cut -f1)
echo "bundle.sh: carry $CARRY/bundle.tgz: ${size_kib} KiB"
if (( size_kib >= 64 * 1024 )); then
  echo "bundle.sh: error: the packed bundle is ${size_kib} KiB; the device tool carries at most 64 MiB" >&2
  exit 1
fi
