#!/usr/bin/env bash
# run_fuzzers.sh: builds (build_fuzzers.sh: ASan + UBSan, undefined behaviour
# fatal) and runs every libFuzzer target of tests/fuzz from its seed corpus,
# for a number of executions or a time box each, and prints the executions
# per target. A crash, leak, timeout or sanitizer report fails the run and
# leaves the reproducing input in $KERNCAP_FUZZ_OUT.
#
#   tests/fuzz/run_fuzzers.sh [RUNS] [TARGET...]           # RUNS default 1000000
#   tests/fuzz/run_fuzzers.sh --seconds N [TARGET...]      # N seconds per target
#
# `bash tests/run_tests.sh` (ctest's fuzz_smoke) runs the time-boxed form.
# Seeds: tests/fuzz/corpus/<target> (small files in the repository) and, for
# cubin_fuzzer, cubins written at run time: hand-made ones (make_cubin_seeds)
# and real sm_90 cubins of common/cuda/testdata when nvcc is installed
# ($KERNCAP_NVCC, else /usr/local/cuda/bin/nvcc or nvcc on PATH).
# New inputs the fuzzers find go to $KERNCAP_FUZZ_OUT/<target>/corpus (not
# into the repository's seed corpus).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs=1000000
seconds=0
if [[ "${1:-}" == "--seconds" ]]; then
  seconds="${2:?--seconds needs a number}"
  shift 2
elif [[ $# -gt 0 ]]; then
  runs="$1"
  shift
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(manifest_fuzzer kcap_file_fuzzer agent_link_fuzzer reference_import_fuzzer cubin_fuzzer)
fi
build="${KERNCAP_FUZZ_BUILD_DIR:-$root/build-fuzz}"
out="${KERNCAP_FUZZ_OUT:-$build/fuzz-out}"
start=$SECONDS
"$root/tests/fuzz/build_fuzzers.sh"
echo "fuzzers built in $((SECONDS - start)) s"

# Seeds made at run time (nothing binary is committed for them).
cubin_seeds="$out/cubin_seeds"
rm -rf "$cubin_seeds"
mkdir -p "$cubin_seeds"
"$build/fuzz/make_cubin_seeds" "$cubin_seeds" >/dev/null
nvcc="${KERNCAP_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [[ -x "$nvcc" ]]; then
  for cu in globals textures; do
    "$nvcc" -cubin -arch=sm_90 -o "$cubin_seeds/$cu.sm_90.cubin" \
      "$root/common/cuda/testdata/$cu.cu" 2>"$cubin_seeds/$cu.log" ||
      echo "nvcc $cu.cu failed (hand-made seeds only): $(tail -1 "$cubin_seeds/$cu.log")"
    rm -f "$cubin_seeds/$cu.log"
  done
  "$nvcc" -cubin -rdc=true -arch=sm_80 -o "$cubin_seeds/textures_rdc.sm_80.cubin" \
    "$root/common/cuda/testdata/textures_rdc.cu" 2>/dev/null || true
else
  echo "no nvcc: cubin_fuzzer starts from hand-made seeds only"
fi

status=0
for t in "${targets[@]}"; do
  name="${t%_fuzzer}"
  seeds="$root/tests/fuzz/corpus/$name"
  [[ "$t" == cubin_fuzzer ]] && seeds="$cubin_seeds"
  work="$out/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  log="$work/log.txt"
  limit=(-runs="$runs")
  if [[ "$seconds" != 0 ]]; then limit=(-max_total_time="$seconds"); fi
  # detect_leaks: a leak per input is unbounded growth in a daemon.
  # halt_on_error: undefined behaviour is a failure, not a warning.
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "$build/fuzz/$t" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=512 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
      "$work/corpus" "$seeds" >"$log" 2>&1; then
    execs="$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
    echo "$t: OK, $execs executions"
  else
    echo "$t: FAILED (see $log and $work/artifacts)"
    tail -40 "$log"
    status=1
  fi
done
echo "fuzzing done in $((SECONDS - start)) s"
exit $status
