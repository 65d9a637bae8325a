#!/usr/bin/env bash
# run_gpu_tests.sh: runs kerncap's GPU tests from the bundle (deploy/gpu/bundle.sh)
# on the GPU machine. Logs, per-case artifacts and gtest XML go to $1, else
# $OUT, else ./gpu-test-logs. Exit status: 0 when every test passed or skipped.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${1:-${OUT:-$PWD/gpu-test-logs}}
mkdir -p "$LOGS"

LIBS=$HERE/lib
# Prefer the machine's CUPTI (it matches its driver); fall back to ours.
SYS_CUPTI=""
for d in /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
         /usr/lib/x86_64-linux-gnu; do
  if [[ -e $d/libcupti.so.13 ]]; then SYS_CUPTI=$d; break; fi
done
if [[ -n $SYS_CUPTI ]]; then
  LIBS=$LIBS:$SYS_CUPTI
  echo "CUPTI: system $SYS_CUPTI/libcupti.so.13" | tee "$LOGS/environment.txt"
else
  LIBS=$LIBS:$HERE/lib/cupti
  echo "CUPTI: bundled (no libcupti.so.13 on this machine)" | tee "$LOGS/environment.txt"
fi
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# nvcc and make for the reproducer test (a toolkit on the machine, if any).
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [[ -x $d/nvcc ]] && { PATH=$PATH:$d; break; }; done
export PATH

# Python for the PyTorch/Triton cases: $KERNCAP_PYTHON, else python3 on PATH.
PY=${KERNCAP_PYTHON:-$(command -v python3 || true)}
if [[ -n $PY ]]; then
  export KERNCAP_PYTHON=$PY
  echo "python: $PY: $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)" \
    | tee -a "$LOGS/environment.txt"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 \
    | tail -1 | tee -a "$LOGS/environment.txt"
  "$PY" -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1 \
    | tee -a "$LOGS/environment.txt"
else
  echo "python: none (the PyTorch/Triton cases will skip)" | tee -a "$LOGS/environment.txt"
fi

# cuBLAS for cublas_gemm (not bundled: too large): the toolkit's, the system's,
# or the one in the Python nvidia-cublas wheel that PyTorch uses.
if [[ -z ${KERNCAP_CUBLAS_DIR:-} ]]; then
  cands=(/usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
  if [[ -n $PY ]]; then
    while read -r sp; do
      [[ -d $sp/nvidia ]] || continue
      while read -r f; do cands+=("$(dirname "$f")"); done \
        < <(find "$sp"/nvidia -name 'libcublas.so.13' 2>/dev/null)
    done < <("$PY" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  fi
  for d in "${cands[@]}"; do
    if [[ -e $d/libcublas.so.13 ]]; then export KERNCAP_CUBLAS_DIR=$d; break; fi
  done
fi
echo "cuBLAS: ${KERNCAP_CUBLAS_DIR:-none found (cublas_sgemm will skip)}" | tee -a "$LOGS/environment.txt"
export KERNCAP_BUILD_DIR=$HERE
export KERNCAP_GPU_LOG_DIR=$LOGS/cases
{ uname -a; cat /etc/os-release 2>/dev/null | head -2; nvidia-smi 2>&1 | head -15; } >> "$LOGS/environment.txt"
for b in "$HERE"/bin/* "$HERE"/tests/* "$HERE"/lib/libkerncap_*.so; do
  ldd "$b" | grep -q "not found" && { echo "missing libraries for $b:"; ldd "$b" | grep "not found"; }
done 2>&1 | tee "$LOGS/ldd_missing.txt"

rc=0
# KERNCAP_GPU_ONLY="name ...": run only these tests (e.g. gpu_e2e_test when
# only the agent changed); the others are listed as left out.
# KERNCAP_GPU_E2E_FILTER: gtest filter of the native gpu_e2e_test cases.
run() {
  local name=$1; shift
  if [[ -n ${KERNCAP_GPU_ONLY:-} && " $KERNCAP_GPU_ONLY " != *" $name "* ]]; then
    echo "=== $name: left out (KERNCAP_GPU_ONLY)" | tee -a "$LOGS/summary.txt"
    return
  fi
  echo "=== $name" | tee -a "$LOGS/summary.txt"
  "$@" > "$LOGS/$name.log" 2>&1
  local r=$?
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED|pass|fail|bench) +\]|^\[==========\]" "$LOGS/$name.log" \
    | tee -a "$LOGS/summary.txt"
  echo "$name exit $r" | tee -a "$LOGS/summary.txt"
  [[ $r -ne 0 ]] && rc=1
}
# Time limits fit one device call (the whole script well under 7 minutes);
# the Python cases run apart so a slow import or JIT cannot starve the rest.
run replay_gpu_test timeout "${KC_T_REPLAY:-40}" "$HERE"/tests/replay_gpu_test \
  --gtest_output=xml:"$LOGS"/replay_gpu_test.xml
# kerncap-replay serve (resident mode): serves an in-process capture, submits
# candidate cubins (pass, fail, faster/slower, fault), checks the device comparator.
if [[ -x $HERE/tests/serve_gpu_test ]]; then
  run serve_gpu_test timeout "${KC_T_SERVE:-90}" "$HERE"/tests/serve_gpu_test \
    --gtest_output=xml:"$LOGS"/serve_gpu_test.xml
fi
# The replay library's C API and its ctypes binding (reproducer/replay/capi):
# prepare in the primary context, our own launch of the kernel, validate,
# restore_inputs, relocation.
if [[ -x $HERE/tests/replay_capi_gpu_test ]]; then
  export KERNCAP_REPLAY_TEST_FIXTURE=$HERE/tests/replay_capi_fixture
  export KERNCAP_REPLAY_TEST_LIB=$HERE/lib/libkerncap_replay.so
  run replay_capi_gpu_test timeout "${KC_T_CAPI:-60}" "$HERE"/tests/replay_capi_gpu_test \
    --gtest_output=xml:"$LOGS"/replay_capi_gpu_test.xml
  [[ -n $PY ]] && run replay_capi_python_gpu_test timeout "${KC_T_CAPI:-60}" "$PY" \
    "$HERE"/python_capi/kerncap_replay_gpu_test.py
fi
# Reproducer projects: generate, make recompile validate with the real
# kerncap-replay, an edited kernel must fail validation (needs nvcc and make).
if [[ -x $HERE/tests/repro_gpu_test ]]; then
  run repro_gpu_test timeout "${KC_T_REPRO:-120}" "$HERE"/tests/repro_gpu_test \
    --gtest_output=xml:"$LOGS"/repro_gpu_test.xml
fi
# The CUDA agent in process with a fake transport: what a capture records
# (regions, globals, code object, arguments, texture objects) and refusals.
if [[ -x $HERE/gpu_tests/agent_capture_gpu_test ]]; then
  run agent_capture_gpu_test timeout "${KC_T_AGENT:-60}" "$HERE"/gpu_tests/agent_capture_gpu_test
fi
# The device snapshot capture path: exact images while the
# application scribbles after its release, and the host-path fallbacks.
if [[ -x $HERE/gpu_tests/snapshot_capture_gpu_test ]]; then
  run snapshot_capture_gpu_test timeout "${KC_T_SNAPSHOT:-60}" "$HERE"/gpu_tests/snapshot_capture_gpu_test
fi

# Live substitution into a running application (kerncapctl substitute --ab).
if [[ -x $HERE/tests/substitute_gpu_test ]]; then
  run substitute_gpu_test timeout "${KC_T_SUBSTITUTE:-120}" "$HERE"/tests/substitute_gpu_test \
    --gtest_output=xml:"$LOGS"/substitute_gpu_test.xml
fi
# kerncap tune over the real resident server (needs this script's library path).
if [[ -n $PY && -f $HERE/python_client/tests/gpu/tune_gpu_test.py ]]; then
  run tune_gpu_test timeout "${KC_T_TUNE:-150}" "$PY" "$HERE"/python_client/tests/gpu/tune_gpu_test.py \
    --build "$HERE"
fi
run gpu_e2e_test timeout "${KC_T_NATIVE:-230}" "$HERE"/tests/gpu_e2e_test \
  --gtest_filter="${KERNCAP_GPU_E2E_FILTER:--*torch*:*triton*}" --gtest_output=xml:"$LOGS"/gpu_e2e_test.xml
# KERNCAP_GPU_PYTHON=0 leaves them out (a quicker run of the native cases).
if [[ ${KERNCAP_GPU_PYTHON:-1} != 0 ]]; then
  run gpu_e2e_python timeout "${KC_T_PYTHON:-100}" "$HERE"/tests/gpu_e2e_test \
    --gtest_filter='*torch*:*triton*' --gtest_output=xml:"$LOGS"/gpu_e2e_python.xml
  # Triton shim cases: autotuned matmul, in-place kernel, torch.compile model,
  # each followed by its Triton reproducer (kerncapctl repro + run.py: needs
  # lib/libkerncap_replay.so, which the runner passes as KERNCAP_REPLAY_LIB).
  # With the reproducers they take longer than the rest together: give them
  # a device call of their own (KERNCAP_GPU_ONLY=shim_gpu_test);
  # KERNCAP_SHIM_REPRO=0 leaves the reproducers out. All eight cases take
  # more than one call: KERNCAP_SHIM_CASES="case ..." runs some of them.
  if [[ -n $PY && -d $HERE/python_shim ]]; then
    # shellcheck disable=SC2086
    run shim_gpu_test timeout "${KC_T_SHIM:-560}" "$PY" "$HERE"/python_shim/tests/gpu/run_gpu_shim_tests.py \
      --build "$HERE" --logs "$LOGS/shim" ${KERNCAP_SHIM_CASES:-}
  fi
  # The quickstart notebook (client/python/examples) run headless with nbclient
  # against a live capture: kerncapd, gpu_tests/vector_add under the agent,
  # validate/bench through kerncap-replay. nbclient, nbformat, ipykernel and
  # jupyter_client are not on the GPU machine: carry them as wheels (.whl/,
  # installed with pip --target /tmp/site, PYTHONPATH=/tmp/site; the command is
  # in run_notebook_gpu.py's header). Skips (77) without them.
  if [[ -n $PY && -f $HERE/python_client/tests/gpu/run_notebook_gpu.py ]]; then
    run notebook_gpu_test timeout "${KC_T_NOTEBOOK:-300}" "$PY" \
      "$HERE"/python_client/tests/gpu/run_notebook_gpu.py --build "$HERE" "$LOGS/notebook_gpu"
  fi
else
  echo "=== gpu_e2e_python: left out (KERNCAP_GPU_PYTHON=0)" | tee -a "$LOGS/summary.txt"
fi
exit $rc
