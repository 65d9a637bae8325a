#!/usr/bin/env bash
# run_llama_cpp.sh: the seed paper's own case, measured on llama.cpp's CUDA
# backend in one run on a GPU machine: how long one edit of a kernel takes to
# check (a) by rebuilding and rerunning llama.cpp, (b) in a kerncap
# reproducer with `make recompile validate`. Target: (b) at least 30x faster.
#
# Inputs (the bundle's layout, as deploy/gpu/run_benchmarks.sh runs it):
#   LLAMA_SRC_TAR  llama.cpp's sources packed by fetch_llama_cpp.sh
#                  (default: .llama/llama-src.tar.xz beside the repo)
#   KERNCAP_BIN    folder with kerncapd, kerncapctl, kerncap-replay
#   KERNCAP_AGENT  libkerncap_agent.so
#
# Steps:
#   1. Build llama.cpp as its README says (CMake's default generator, Unix
#      Makefiles, `cmake --build build -j`), CUDA for sm_90 only, -lineinfo so
#      the reproducer finds the sources; FlashAttention kernels off unless
#      KERNCAP_LLAMA_FA=1, which only shortens the one full build: neither
#      loop rebuilds them. With that generator CMake passes the include
#      folders through options files (--options-file .../includes_CUDA.rsp),
#      which the reproducer must expand.
#   2. A random-weight model written by make_random_model.py with llama.cpp's
#      own gguf writer, quantized to Q4_0 with its own llama-quantize.
#   3. The application check: llama-simple, greedy, 16 tokens; its text with
#      the unedited build is the reference.
#   4. Capture rms_norm_f32 (KERNCAP_LLAMA_KERNEL; the arm's pattern is
#      KERNCAP_LLAMA_ARM, default the same) from llama-simple under
#      the agent (CUDA graphs off: GGML_CUDA_DISABLE_GRAPHS=1), generate the
#      reproducer from the capture, the source tree and the build's
#      compile_commands.json, with no hand edits; make recompile validate once,
#      then make serve (resident replay, as in P6).
#   5. KERNCAP_LLAMA_REPS times (default 3) the same edit in both trees (an
#      unroll pragma on the kernel's first loop: a real change of the code that
#      keeps the results bit-identical):
#        (a) edit llama.cpp's norm.cu, cmake --build (incremental) + llama-simple
#            + compare its text
#        (b) edit the file kerncap.json names (edit.file: kernel.cu, the
#            minimal unit, when it verified at generation; else the whole unit
#            under src/), make recompile validate in the reproducer
#      and, for reference, make recompile-full validate (the whole unit).
#      The figure is median(a) / median(b).
#
# Usage: run_llama_cpp.sh [LOG_DIR]   (default $OUT, else ./llama-logs)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LOGS=${1:-${OUT:-$PWD/llama-logs}}
REPS=${KERNCAP_LLAMA_REPS:-3}
KERNEL=${KERNCAP_LLAMA_KERNEL:-rms_norm_f32}
KFILE=${KERNCAP_LLAMA_KERNEL_FILE:-ggml/src/ggml-cuda/norm.cu}
# What the arm matches (a substring of the demangled name): the kernel's name
# unless that also names other kernels (mul_mat_q: KERNCAP_LLAMA_ARM='mul_mat_q<',
# which leaves out mul_mat_q_stream_k_fixup).
ARM=${KERNCAP_LLAMA_ARM:-$KERNEL}
WORK=${KERNCAP_LLAMA_DIR:-/tmp/kc-llama}
TAR=${LLAMA_SRC_TAR:-$ROOT/.llama/llama-src.tar.xz}
BIN=${KERNCAP_BIN:?set KERNCAP_BIN to the folder with kerncapd, kerncapctl, kerncap-replay}
AGENT=${KERNCAP_AGENT:?set KERNCAP_AGENT to libkerncap_agent.so}
PROMPT="the quick brown fox jumps over the lazy dog"
mkdir -p "$LOGS"
note() { echo "[llama $(date +%T)] $*" | tee -a "$LOGS/llama.log"; }
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.3f", a - b }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for tool in cmake nvcc make awk python3; do
  command -v "$tool" > /dev/null || { note "missing $tool: not measured"; exit 77; }
done
nvidia-smi > /dev/null 2>&1 || { note "no GPU: not measured"; exit 77; }
[[ -f $TAR ]] || { note "no llama.cpp sources at $TAR (run tests/bench/llama_cpp/fetch_llama_cpp.sh)"; exit 77; }

SRC=$WORK/src
BUILD=$WORK/build
# KERNCAP_LLAMA_REUSE=1 keeps an earlier run's build in $WORK (a device call
# is limited in time: one call builds, the next measures). The kernel's file
# is put back as fetched and rebuilt first, so the reference run is the
# unedited application.
# KERNCAP_LLAMA_REUSE=require: measure only with a kept build (77 without one).
kept=0
[[ -x $BUILD/bin/llama-simple && -s $WORK/full_build_s ]] && kept=1
REUSE=${KERNCAP_LLAMA_REUSE:-0}
if [[ $REUSE == require && $kept == 0 ]]; then
  note "no kept build in $WORK (KERNCAP_LLAMA_REUSE=require): not measured"
  exit 77
fi
if [[ $REUSE != 0 && $kept == 1 ]]; then
  rm -rf "$WORK/pristine" "$WORK/daemon" "$WORK/repro"
  mkdir -p "$WORK/pristine"
  tar xJf "$TAR" -C "$WORK/pristine"
  cmp -s "$WORK/pristine/$KFILE" "$SRC/$KFILE" || cp "$WORK/pristine/$KFILE" "$SRC/$KFILE"
  cmake --build "$BUILD" -j"$(nproc)" --target llama-simple llama-quantize > "$LOGS/build.log" 2>&1 ||
    { note "rebuild of the kept build failed"; tail -30 "$LOGS/build.log"; exit 1; }
  full_build=$(cat "$WORK/full_build_s")
  note "reusing the build in $BUILD (its full build took ${full_build} s)"
else
  rm -rf "$WORK"
  mkdir -p "$WORK/src"
  tar xJf "$TAR" -C "$WORK/src"
  [[ -f $SRC/$KFILE ]] || { note "the sources have no $KFILE"; exit 1; }
  note "full build of llama.cpp (CUDA, sm_90; $(nproc) cores)"
  t=$(now)
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo -DGGML_CUDA_FA="${KERNCAP_LLAMA_FA:-OFF}" \
    -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$LOGS/configure.log" 2>&1 ||
    { note "configure failed"; tail -30 "$LOGS/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target llama-simple llama-quantize > "$LOGS/build.log" 2>&1 ||
    { note "build failed"; tail -30 "$LOGS/build.log"; exit 1; }
  full_build=$(since "$t")
  echo "$full_build" > "$WORK/full_build_s"
  note "full build: ${full_build} s ($(grep -c 'Building CUDA object' "$LOGS/build.log") CUDA units)"
fi
# KERNCAP_LLAMA_BUILD_ONLY=1: stop here (a later KERNCAP_LLAMA_REUSE=1 run measures).
[[ ${KERNCAP_LLAMA_BUILD_ONLY:-0} == 1 ]] && { note "build only: stopping"; exit 0; }
grep -q -- '--options-file' "$BUILD/compile_commands.json" &&
  note "compile_commands.json uses --options-file (CMake response files)"

t=$(now)
python3 "$HERE/make_random_model.py" --gguf-py "$SRC/gguf-py" --out "$WORK/model-f16.gguf" \
  > "$LOGS/model.log" 2>&1 || { note "model writer failed"; tail -20 "$LOGS/model.log"; exit 1; }
"$BUILD/bin/llama-quantize" "$WORK/model-f16.gguf" "$WORK/model-q4_0.gguf" Q4_0 \
  >> "$LOGS/model.log" 2>&1 || { note "llama-quantize failed"; tail -20 "$LOGS/model.log"; exit 1; }
MODEL=$WORK/model-q4_0.gguf
note "model: $(du -h "$MODEL" | cut -f1) Q4_0 in $(since "$t") s"

app() { "$BUILD/bin/llama-simple" -m "$MODEL" -n 16 -ngl 99 "$PROMPT"; }
app > "$WORK/reference.txt" 2> "$LOGS/reference.log" || { note "llama-simple failed"; tail -20 "$LOGS/reference.log"; exit 1; }
[[ -s $WORK/reference.txt ]] || { note "llama-simple printed nothing"; exit 1; }
check() { app > "$WORK/check.txt" 2>> "$LOGS/check.log" && cmp -s "$WORK/check.txt" "$WORK/reference.txt"; }

# Capture.
D=$WORK/daemon
mkdir -p "$D"
"$BIN"/kerncapd --store="$D/store" --socket="$D/ctl.sock" --agent-socket="$D/agent.sock" \
  > "$LOGS/kerncapd.log" 2>&1 &
DPID=$!
REPRO=$WORK/repro
MAKEVARS=(KERNCAP_REPLAY="$BIN/kerncap-replay")
SERVING=""
cleanup() {
  [[ -n $SERVING ]] && make -C "$REPRO" "${MAKEVARS[@]}" serve-stop >> "$LOGS/serve-stop.log" 2>&1
  kill $DPID 2>/dev/null
  wait $DPID 2>/dev/null
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -S $D/ctl.sock ]] && break; sleep 0.1; done
ctl() { "$BIN"/kerncapctl --socket="$D/ctl.sock" "$@"; }
ctl arm --kernel="$ARM" --count=1 > "$LOGS/arm.log" 2>&1 || { note "arm failed"; cat "$LOGS/arm.log"; exit 1; }
t=$(now)
GGML_CUDA_DISABLE_GRAPHS=1 CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_SOCKET=$D/agent.sock app \
  > "$WORK/captured-run.txt" 2> "$LOGS/capture-run.log" || { note "capture run failed"; tail -20 "$LOGS/capture-run.log"; exit 1; }
note "capture run: $(since "$t") s; application output $(cmp -s "$WORK/captured-run.txt" "$WORK/reference.txt" && echo unchanged || echo CHANGED)"
cid=""
for _ in $(seq 300); do
  cid=$(ctl captures -q 2>/dev/null | head -1)  # newest first
  [[ -n $cid ]] && break
  sleep 0.2
done
[[ -n $cid ]] || { note "no capture"; ctl arms >> "$LOGS/arm.log" 2>&1; exit 1; }
ctl show "$cid" > "$LOGS/show.txt" 2>&1
note "captured $cid: $(grep -m1 -i 'kernel' "$LOGS/show.txt")"
ctl repro "$cid" --out="$REPRO" --source-dir="$SRC" --compile-commands="$BUILD/compile_commands.json" \
  > "$LOGS/repro.log" 2>&1 || { note "repro failed"; cat "$LOGS/repro.log"; exit 1; }
cp "$REPRO/kerncap.json" "$LOGS/kerncap.json"
cp "$REPRO/Makefile" "$LOGS/repro-Makefile"
# The file to edit is the one kerncap.json names (edit.file): the minimal unit
# when it verified, else the whole unit; edit.minimal_unit says why.
IFS=$'\t' read -r RFILE EDIT_UNIT MINIMAL MINIMAL_WHY < <(python3 - "$REPRO/kerncap.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1])).get("edit") or {}
m = e.get("minimal_unit") or {}
print(e.get("file", ""), e.get("unit", "?"), m.get("outcome", "none"),
      (m.get("reason") or "-").replace("\t", " ")[:300], sep="\t")
PY
)
[[ $MINIMAL_WHY == "-" ]] && MINIMAL_WHY=""
[[ -n $RFILE && -f $REPRO/$RFILE ]] || { note "kerncap.json names no edit file (edit.file: '$RFILE')"; (cd "$REPRO" && find . -type f) > "$LOGS/repro-tree.txt"; exit 1; }
note "reproducer: edit $RFILE ($EDIT_UNIT unit; minimal unit: $MINIMAL${MINIMAL_WHY:+ - $MINIMAL_WHY}) + $(cd "$REPRO" && find src -type f | wc -l) source files"
make -C "$REPRO" "${MAKEVARS[@]}" recompile validate > "$LOGS/repro-first.log" 2>&1 ||
  { note "first recompile+validate failed"; tail -40 "$LOGS/repro-first.log"; exit 1; }
note "first make recompile validate passed"
t=$(now)
make -C "$REPRO" "${MAKEVARS[@]}" serve > "$LOGS/serve-start.log" 2>&1 ||
  { note "make serve failed"; tail -30 "$LOGS/serve-start.log"; exit 1; }
SERVING=1
serve_start=$(since "$t")
note "make serve: ready in ${serve_start} s (not part of the loop)"

# The edit: an unroll pragma on the first loop of the kernel's definition.
edit() {  # FILE FACTOR
  python3 - "$1" "$2" "$KERNEL" <<'PY'
import re, sys
path, factor, kernel = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
text = re.sub(r"\n[ \t]*#pragma unroll [0-9]+ // kerncap-bench", "", text)
start = text.find("__global__ void " + kernel)
# An unroll pragma the loop already has is replaced (two on one loop do not
# compile), not stacked.
m = re.compile(r"(?:\n[ \t]*#pragma unroll[^\n]*)?\n([ \t]*)for \(").search(text, start)
if start < 0 or not m:
    sys.exit("no loop in %s's definition" % kernel)
text = (text[:m.start()] + "\n%s#pragma unroll %s // kerncap-bench\n%sfor (" % (m.group(1), factor, m.group(1))
        + text[m.end():])
open(path, "w").write(text)
PY
}

A=() B=() C=()
ok_a=0 ok_b=0 ok_c=0 submits=0
for ((r = 1; r <= REPS; r++)); do
  f=$((1 << r))
  edit "$SRC/$KFILE" "$f" || exit 1
  t=$(now)
  cmake --build "$BUILD" -j"$(nproc)" --target llama-simple >> "$LOGS/loop-a.log" 2>&1 && check
  rc=$?
  A+=("$(since "$t")")
  ((rc == 0)) && ok_a=$((ok_a + 1))
  note "(a) rep $r unroll $f: ${A[-1]} s (rebuild + run + check, exit $rc)"
  edit "$REPRO/$RFILE" "$f" || exit 1
  t=$(now)
  make -C "$REPRO" "${MAKEVARS[@]}" recompile validate > "$LOGS/loop-b-$r.log" 2>&1
  rc=$?
  B+=("$(since "$t")")
  ((rc == 0)) && ok_b=$((ok_b + 1))
  grep -q 'kerncap-replay submit' "$LOGS/loop-b-$r.log" && submits=$((submits + 1))
  note "(b) rep $r unroll $f: ${B[-1]} s (make recompile validate of $RFILE, exit $rc)"
  # The whole unit, for reference (KERNCAP_LLAMA_RECOMPILE_FULL=0 leaves it out).
  [[ ${KERNCAP_LLAMA_RECOMPILE_FULL:-1} == 1 ]] || continue
  t=$(now)
  make -C "$REPRO" "${MAKEVARS[@]}" recompile-full validate > "$LOGS/loop-c-$r.log" 2>&1
  rc=$?
  C+=("$(since "$t")")
  ((rc == 0)) && ok_c=$((ok_c + 1))
  note "(reference) rep $r: ${C[-1]} s (make recompile-full validate: the whole unit under src/, exit $rc)"
done
ma=$(median "${A[@]}")
mb=$(median "${B[@]}")
ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.1f", a / b }')
# The whole-unit reference, when it ran (never a 0 s figure that was not measured).
ref_text="not run (KERNCAP_LLAMA_RECOMPILE_FULL=0)" ref_s=null ref_ok=null
if ((${#C[@]} > 0)); then
  ref_s=$(median "${C[@]}")
  ref_ok=$ok_c
  ref_text=$(printf '%.3f s (%d/%d)' "$ref_s" "$ok_c" "$REPS")
fi
printf 'llama.cpp edit loop (%s): traditional %.2f s (%d/%d checks passed), kerncap %.3f s editing %s (%d/%d validates passed, %d through make serve), ratio %sx (target >= 30); whole-unit recompile-full validate %s; full build %.0f s\n' \
  "$KERNEL" "$ma" "$ok_a" "$REPS" "$mb" "$RFILE" "$ok_b" "$REPS" "$submits" "$ratio" "$ref_text" "$full_build" | tee -a "$LOGS/llama.log"
printf 'BENCH_JSON {"bench":"llama_cpp_edit_loop","kernel":"%s","traditional_s":%.3f,"kerncap_s":%.3f,"ratio":%s,"checks_passed":%d,"validates_passed":%d,"submits":%d,"reps":%d,"full_build_s":%.1f,"serve_start_s":%.3f,"edit_file":"%s","edit_unit":"%s","minimal_unit":"%s","recompile_full_validate_s":%s,"recompile_full_validates_passed":%s}\n' \
  "$KERNEL" "$ma" "$mb" "$ratio" "$ok_a" "$ok_b" "$submits" "$REPS" "$full_build" "$serve_start" "$RFILE" "$EDIT_UNIT" "$MINIMAL" "$ref_s" "$ref_ok" | tee -a "$LOGS/llama.log"
