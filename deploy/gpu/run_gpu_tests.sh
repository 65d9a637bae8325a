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
export KERNCAP_BUILD_DIR=$HERE
export KERNCAP_GPU_LOG_DIR=$LOGS/cases
{ uname -a; cat /etc/os-release 2>/dev/null | head -2; nvidia-smi 2>&1 | head -15; } >> "$LOGS/environment.txt"
for b in "$HERE"/bin/* "$HERE"/tests/* "$HERE"/lib/libkerncap_agent.so; do
  ldd "$b" | grep -q "not found" && { echo "missing libraries for $b:"; ldd "$b" | grep "not found"; }
done 2>&1 | tee "$LOGS/ldd_missing.txt"

rc=0
run() {
  local name=$1; shift
  echo "=== $name" | tee -a "$LOGS/summary.txt"
  "$@" > "$LOGS/$name.log" 2>&1
  local r=$?
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED|pass|fail|bench) +\]|^\[==========\]" "$LOGS/$name.log" \
    | tee -a "$LOGS/summary.txt"
  echo "$name exit $r" | tee -a "$LOGS/summary.txt"
  [[ $r -ne 0 ]] && rc=1
}
run replay_gpu_test timeout 60 "$HERE"/tests/replay_gpu_test --gtest_output=xml:"$LOGS"/replay_gpu_test.xml
run gpu_e2e_test timeout 360 "$HERE"/tests/gpu_e2e_test --gtest_output=xml:"$LOGS"/gpu_e2e_test.xml
exit $rc
