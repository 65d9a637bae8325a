#!/usr/bin/env bash
# run_fuzzers.sh: builds (build_fuzzers.sh) and runs every libFuzzer target of
# tests/fuzz from its seed corpus (tests/fuzz/corpus/<target>, small files in
# the repository), for a number of executions each, and prints the
# executions per target. A crash, leak, timeout or sanitizer report fails the
# run and leaves the reproducing input in $KERNCAP_FUZZ_OUT.
#
#   tests/fuzz/run_fuzzers.sh [RUNS] [TARGET...]     # RUNS default 1000000
#
# New inputs the fuzzers find go to $KERNCAP_FUZZ_OUT/<target>/corpus (not
# into the repository's seed corpus).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-1000000}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(manifest_fuzzer kcap_file_fuzzer agent_link_fuzzer reference_import_fuzzer)
fi
build="${KERNCAP_FUZZ_BUILD_DIR:-$root/build-fuzz}"
out="${KERNCAP_FUZZ_OUT:-$build/fuzz-out}"
"$root/tests/fuzz/build_fuzzers.sh"
status=0
for t in "${targets[@]}"; do
  name="${t%_fuzzer}"
  seeds="$root/tests/fuzz/corpus/$name"
  work="$out/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  log="$work/log.txt"
  # detect_leaks: a leak per input is unbounded growth in a daemon.
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
      "$build/fuzz/$t" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
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
exit $status
