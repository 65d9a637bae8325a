#!/usr/bin/env bash
# run_p6.sh: the P6 benchmark, the edit-recompile-validate loop, measured in
# one run on a GPU machine (run it from the bundle's directory layout, as
# deploy/gpu/run_gpu_tests.sh does, or with KERNCAP_BIN pointing at kerncapd,
# kerncapctl and kerncap-replay and KERNCAP_AGENT at libkerncap_agent.so).
#
# The application is tests/bench/p6/app ("kcsim": 30 translation units,
# templates instantiated per type and block size, separable compilation for
# four GPU architectures). The kernel under work is attention_scores_kernel
# in src/attention/scores.cu, reached after real set-up work (tokenizer
# training, model generation and upload, 20 decoder layers).
#
#   (a) traditional loop: edit scores.cu in the application's tree, rebuild
#       the application (ninja, incremental), run it to layer 20's attention
#       scores and check them (kcsim --check-layer=20).
#   (b) kerncap loop: the same edit in the reproducer (the file kerncap.json
#       names: kernel.cu, the minimal unit, when it verified), then
#       `make recompile validate` (only the kernel, sm_90 cubin; the captured
#       dispatch replayed with it and compared with the captured outputs).
#       The project runs in resident mode: `make serve` (once, after the first
#       recompile, before loop (b); stopped at exit) restores the capture in a
#       background `kerncap-replay serve`, and `make validate` then sends the
#       cubin to it (`kerncap-replay submit`) instead of starting a replay.
#       Every rep checks that its validate went through submit; the log and
#       BENCH_JSON give recompile and validate times apart (from the moment
#       make prints validate's command). KERNCAP_P6_SERVE=0 measures the
#       one-shot replay instead.
#
# Each loop runs KERNCAP_P6_REPS times (default 3) with a different edit each
# time (the inner loop's unroll factor); the figure is median(a) / median(b),
# target >= 30. After the loops, three more recompiles with `nvcc -time`
# record where the compile's time goes on this machine (nvcc-time.csv, not
# part of the figure).
#
# Usage: run_p6.sh [LOG_DIR]     (default $OUT, else ./p6-logs)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${1:-${OUT:-$PWD/p6-logs}}
REPS=${KERNCAP_P6_REPS:-3}
SERVE=${KERNCAP_P6_SERVE:-1}
CHECK_LAYER=20
WORK=${KERNCAP_P6_DIR:-/tmp/kc-p6}
BIN=${KERNCAP_BIN:?set KERNCAP_BIN to the folder with kerncapd, kerncapctl, kerncap-replay}
AGENT=${KERNCAP_AGENT:?set KERNCAP_AGENT to libkerncap_agent.so}
mkdir -p "$LOGS"
note() { echo "[p6 $(date +%T)] $*" | tee -a "$LOGS/p6.log"; }
now() { date +%s.%N; }
# Prefixes each line with the time it was read (bash 5: no fork per line;
# LC_ALL=C: a '.' in EPOCHREALTIME whatever the locale).
stamp() {
  local LC_ALL=C line
  while IFS= read -r line; do printf '%s %s\n' "${EPOCHREALTIME:-$(now)}" "$line"; done
}
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.3f", a - b }'; }

for tool in cmake ninja nvcc make awk; do
  command -v "$tool" > /dev/null || { note "missing $tool: P6 not measured"; exit 77; }
done
nvidia-smi > /dev/null 2>&1 || { note "no GPU: P6 not measured"; exit 77; }

rm -rf "$WORK"
mkdir -p "$WORK"
cp -r "$HERE/app" "$WORK/app"
APP=$WORK/app
BUILD=$WORK/app-build

note "full build of the application"
t=$(now)
cmake -S "$APP" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$LOGS/app-configure.log" 2>&1 ||
  { note "configure failed"; exit 1; }
ninja -C "$BUILD" > "$LOGS/app-build.log" 2>&1 || { note "build failed"; tail -20 "$LOGS/app-build.log"; exit 1; }
full_build=$(since "$t")
note "full build: ${full_build} s ($(grep -c '\.cu\.o$\|Building CUDA' "$LOGS/app-build.log") steps)"

# Capture the dispatch under work with kerncapd + the agent.
D=$WORK/daemon
mkdir -p "$D"
"$BIN"/kerncapd --store="$D/store" --socket="$D/ctl.sock" --agent-socket="$D/agent.sock" \
  > "$LOGS/kerncapd.log" 2>&1 &
DPID=$!
REPRO=$WORK/repro
MAKEVARS=(KERNCAP_REPLAY="$BIN/kerncap-replay")
SERVING=""
cleanup() {
  if [[ -n $SERVING ]]; then
    make -C "$REPRO" "${MAKEVARS[@]}" serve-stop >> "$LOGS/serve-stop.log" 2>&1
    cp "$REPRO/build/serve.log" "$LOGS/serve.log" 2>/dev/null
  fi
  kill $DPID 2>/dev/null
  wait $DPID 2>/dev/null
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -S $D/ctl.sock ]] && break; sleep 0.1; done
ctl() { "$BIN"/kerncapctl --socket="$D/ctl.sock" "$@"; }
ctl arm --kernel=attention_scores_kernel --nth=$((CHECK_LAYER + 1)) > "$LOGS/arm.log" 2>&1 ||
  { note "arm failed"; cat "$LOGS/arm.log"; exit 1; }
t=$(now)
CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_SOCKET=$D/agent.sock "$BUILD"/kcsim \
  --check-layer=$CHECK_LAYER > "$LOGS/capture-run.log" 2>&1 || { note "capture run failed"; exit 1; }
note "capture run: $(since "$t") s"
cid=""
for _ in $(seq 300); do
  cid=$(ctl captures -q 2>/dev/null | head -1)  # newest first
  [[ -n $cid ]] && break
  sleep 0.2
done
[[ -n $cid ]] || { note "no capture"; exit 1; }
note "captured $cid"
ctl repro "$cid" --out="$REPRO" --source-dir="$APP" --compile-commands="$BUILD/compile_commands.json" \
  > "$LOGS/repro.log" 2>&1 || { note "repro failed"; cat "$LOGS/repro.log"; exit 1; }
REL=src/attention/scores.cu
# The reproducer's file to edit is the one kerncap.json names (edit.file:
# kernel.cu, the minimal unit, when it verified at generation; make recompile
# then compiles only that file), else the unit's copy under src/.
REPRO_SCORES=$(python3 -c 'import json, sys; print((json.load(open(sys.argv[1])).get("edit") or {}).get("file", ""))' \
  "$REPRO/kerncap.json" 2>/dev/null)
[[ -n $REPRO_SCORES && -f $REPRO/$REPRO_SCORES ]] || REPRO_SCORES=$(cd "$REPRO" && find src -name scores.cu | head -1)
[[ -n $REPRO_SCORES ]] || { note "the reproducer has no scores.cu"; ls -R "$REPRO" > "$LOGS/repro-tree.txt"; exit 1; }
note "reproducer: edits go to $REPRO_SCORES"
make -C "$REPRO" "${MAKEVARS[@]}" recompile validate > "$LOGS/repro-first.log" 2>&1 ||
  { note "first recompile+validate failed"; tail -30 "$LOGS/repro-first.log"; exit 1; }
serve_start=0
if [[ $SERVE != 0 ]]; then
  t=$(now)
  make -C "$REPRO" "${MAKEVARS[@]}" serve > "$LOGS/serve-start.log" 2>&1 ||
    { note "make serve failed"; tail -30 "$LOGS/serve-start.log"; exit 1; }
  SERVING=1
  serve_start=$(since "$t")
  note "make serve: ready in ${serve_start} s (capture restored once; not part of the loop)"
fi

# The edit: the inner loop's unroll factor (a real change of the kernel's code).
edit() {  # FILE FACTOR
  sed -i -E '/^ *#pragma unroll [0-9]+$/d' "$1"
  sed -i -E "s/^( *)(for \(int d = 0; d < kHeadDim; \+\+d\))/\1#pragma unroll $2\n\1\2/" "$1"
}

declare -a A B BC BV
submits=0
for ((r = 1; r <= REPS; r++)); do
  f=$((1 << r))
  edit "$APP/$REL" "$f"
  t=$(now)
  ninja -C "$BUILD" >> "$LOGS/loop-a.log" 2>&1 && "$BUILD"/kcsim --check-layer=$CHECK_LAYER >> "$LOGS/loop-a.log" 2>&1
  rc=$?
  A+=("$(since "$t")")
  note "(a) rep $r unroll $f: ${A[-1]} s (exit $rc)"
  edit "$REPRO/$REPRO_SCORES" "$f"
  blog=$LOGS/loop-b-$r.log
  t=$(now)
  make -C "$REPRO" "${MAKEVARS[@]}" recompile validate 2>&1 | stamp > "$blog"
  rc=${PIPESTATUS[0]}
  B+=("$(since "$t")")
  # recompile ends when make prints validate's command (submit or validate).
  tv=$(grep -m1 -E 'kerncap-replay (submit|validate) ' "$blog" | cut -d' ' -f1)
  BC+=("$(awk -v a="${tv:-0}" -v b="$t" 'BEGIN { printf "%.3f", (a > 0 ? a - b : -1) }')")
  BV+=("$(awk -v s="${B[-1]}" -v c="${BC[-1]}" 'BEGIN { printf "%.3f", (c >= 0 ? s - c : -1) }')")
  cat "$blog" >> "$LOGS/loop-b.log"
  how="one-shot replay"
  if grep -q -E 'kerncap-replay submit --socket=' "$blog"; then
    how="submit to the server"
    submits=$((submits + 1))
  elif [[ -n $SERVING ]]; then
    note "(b) rep $r: validate did NOT go through submit (see $blog)"
  fi
  note "(b) rep $r unroll $f: ${B[-1]} s = recompile ${BC[-1]} s + validate ${BV[-1]} s ($how, exit $rc)"
done
if [[ -n $SERVING ]]; then
  make -C "$REPRO" "${MAKEVARS[@]}" serve-stop >> "$LOGS/serve-stop.log" 2>&1
  cp "$REPRO/build/serve.log" "$LOGS/serve.log" 2>/dev/null
  SERVING=""
  note "server: $(grep -h -o 'stopped after [0-9]* request(s)' "$LOGS/serve.log" 2>/dev/null ||
    echo 'no stop line in serve.log'); ${submits} of ${REPS} validates went through submit"
fi
# Where the recompile's time goes here (not part of the figure).
rm -f "$LOGS/nvcc-time.csv"
for _ in 1 2 3; do
  make -C "$REPRO" -B "${MAKEVARS[@]}" NVCC="nvcc -time $LOGS/nvcc-time.csv" recompile \
    >> "$LOGS/nvcc-time.log" 2>&1
done
if [[ -s $LOGS/nvcc-time.csv ]]; then
  note "nvcc phases (median of 3, ms): $(awk -F' *, *' 'NR > 1 && $8 == "ms" {
      n[$2]++; v[$2, n[$2]] = $7 }
    END { for (p in n) { m = n[p]; for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
            if (v[p, j] < v[p, i]) { x = v[p, i]; v[p, i] = v[p, j]; v[p, j] = x }
          printf "%s %.0f; ", p, v[p, int((m + 1) / 2)] } }' "$LOGS/nvcc-time.csv")"
fi
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ma=$(median "${A[@]}")
mb=$(median "${B[@]}")
mbc=$(median "${BC[@]}")
mbv=$(median "${BV[@]}")
ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", a / b }')
served=false
how="validate through make serve"
((submits == REPS)) && served=true
[[ $SERVE == 0 ]] && how="one-shot replays (KERNCAP_P6_SERVE=0)"
[[ $SERVE != 0 && $served == false ]] && how="only $submits of $REPS validates through make serve"
printf 'P6 edit loop: traditional %.2f s, kerncap %.2f s (medians: recompile %.3f s, validate %.3f s; %s), ratio %.1fx (target >= 30); full build %.1f s\n' \
  "$ma" "$mb" "$mbc" "$mbv" "$how" "$ratio" "$full_build" | tee -a "$LOGS/p6.log"
printf 'BENCH_JSON {"bench":"p6_edit_loop","traditional_s":%.3f,"kerncap_s":%.3f,"kerncap_recompile_s":%.3f,"kerncap_validate_s":%.3f,"served":%s,"submits":%d,"serve_start_s":%.3f,"ratio":%.2f,"full_build_s":%.1f,"reps":%d}\n' \
  "$ma" "$mb" "$mbc" "$mbv" "$served" "$submits" "$serve_start" "$ratio" "$full_build" "$REPS" | tee -a "$LOGS/p6.log"
