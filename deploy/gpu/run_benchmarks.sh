#!/usr/bin/env bash
# run_benchmarks.sh: runs kerncap's performance benchmarks from the bundle
# (deploy/gpu/bundle.sh) on the GPU machine and prints a summary table plus
# one JSON line per figure (also in $LOGS/results.jsonl).
#
#   P5  launch rate of empty kernels: agent loaded + kerncapd up + unarmed
#       vs no agent (same binary, pinned to one CPU core). KERNCAP_BENCH_P5_REPS
#       rounds; each round runs every mode once, in an order that rotates from
#       round to round, and the figure per mode is the median of its per-round
#       ratios against the same round's no-agent run (process-to-process noise
#       is ~10%, so single pairs say little). Modes: agent_unarmed (the
#       default: no launch callbacks while unarmed), agent_unarmed_no_toggle
#       (KERNCAP_AGENT_CALLBACK_TOGGLE=0: every driver callback kept on, one
#       atomic load per launch callback),
#       agent_loaded_disabled (KERNCAP_AGENT_DISABLE=1: the driver's injection
#       mode alone) and, with KERNCAP_BENCH_P5_PRELOAD=1, LD_PRELOAD loading.
#       >= 0.97
#   P5g the same for CUDA graph launches: a graph of 10 empty kernel nodes
#       launched KERNCAP_BENCH_LAUNCHES/10 times, agent_unarmed vs no_agent,
#       same rounds and pinning (graph launch callbacks are off while unarmed;
#       only instantiation is tracked). >= 0.97
#   P1  capture pause, 8 GiB then 32 GiB of live, hashed device memory: wall
#       time of the captured launch call vs a pinned D2H copy of the same
#       pre + post bytes, measured in the same process. <= 1.25
#       The first size also captures the same kernel with the same state as
#       a node of a CUDA graph (--also-graph): pause of the graph launch vs
#       the direct launch (the graph's other nodes run one by one meanwhile).
#   P8  kerncap-replay restore throughput (the 8 GiB capture, from kerncapd:
#       --daemon reads the daemon's store directly, read-only, when it can,
#       else streams it through ExportCapture; the summary says which) vs
#       pinned H2D bandwidth measured in the same run. >= 0.5
#       KERNCAP_BENCH_P8_EXPORT=1 also times the export path (--via-export).
#   Mem peak RSS (VmHWM; RssAnon/RssShmem sampled) of the application and of
#       kerncapd during the 32 GiB capture.
#   P1d P1-default: --gib (KERNCAP_BENCH_P1D_GIB, default 24) of
#       live memory, the kernel writes 1% of it, kerncapd at its default
#       settings (no --staging-gib, no --ring-slot-mib), first capture:
#       launch-call pause vs a pinned D2H of the live bytes measured in the
#       same process. Run twice: "snapshot" (the device snapshot path; target
#       <= 0.1 x live D2H) and "host" (KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB so
#       large the snapshot never fits: the host path; target <= 1.2 x the D2H
#       of pre + changed bytes). Prints the capture path, the sub-phase times
#       (quiesce, pre = D2D or D2H, post = compare + changed copies, drain
#       after the release) and the bytes over PCIe from each capture's
#       manifest (agent_timing), and peak RSS of the app and of kerncapd.
#   P2  the second capture of the same process (same run as P1d): pause vs
#       the first capture's (target <= 0.05; bytes over PCIe <= changed + 1%).
#       With chunk fingerprints (chunk_fingerprints) the second capture names
#       the chunks kerncapd holds from the first by their GPU fingerprint;
#       agent_timing.known_bytes says how many bytes did not cross.
#   P5b/serve  kerncap-replay serve (resident mode): median overhead per
#       candidate evaluation (server wall time minus device time of its
#       launches) with 1 GiB of state, 20 evaluations of the same cubin
#       (gpu_bench/serve_bench). <= 5 ms
#   P8v validate time / restore time of one large capture (issue 15):
#       gpu_bench/validate_bench builds a KERNCAP_BENCH_VALIDATE_GIB capture
#       (default 8; incompressible, the kernel writes 1%) and runs
#       `kerncap-replay validate --json` with --compare-on=host and
#       --compare-on=device on it in the same run; per path validate_seconds
#       (restore + expected image + launch + comparison) / restore_seconds
#       and the sub-phases. Target: device path <= 2.
#
# Usage: run_benchmarks.sh [LOG_DIR]     (default $OUT, else ./bench-logs)
# Env:   KERNCAP_BENCH_BUDGET_S  hard limit for everything (default 420 s)
#        KERNCAP_BENCH_DIR       scratch (stores, sockets; default /tmp/kc-bench,
#                                removed at the end). Needs ~45 GiB of disk.
#        KERNCAP_BENCH_SIZES     capture sizes in GiB (default "8 32")
#        KERNCAP_BENCH_LAUNCHES  P5 launches per run (default 1000000)
#        KERNCAP_BENCH_P5_REPS   P5 rounds (default 7)
#        KERNCAP_BENCH_P5_CPU    CPU core the P5 runs are pinned to (default 2)
#        KERNCAP_BENCH_P5_DIAG=1 also the diagnostic P5 modes (no link, unpinned)
#        KERNCAP_BENCH_P5_MODES="label ..."  only these P5 modes (plus no_agent)
#        KERNCAP_BENCH_P5_PRELOAD=1  also measure the LD_PRELOAD mode
#        KERNCAP_BENCH_ONLY=p5   run P5 only (skip P1/P8)
#        KERNCAP_BENCH_P5G_NODES="1 10 100"  P5g also over graphs of these sizes (default 10)
#        KERNCAP_BENCH_ONLY=p1d  run P1-default and P2 only (both variants, ~3 min), after
#                                the host path's storage references: the store's ingest of
#                                8 GiB of random bytes, commit included, and the disk's
#                                durable write rate (p1d_storage_reference)
#        KERNCAP_BENCH_P1D_GIB   P1d/P2 live GiB (default 24)
#        KERNCAP_BENCH_P8_EXPORT=1  P8 also through the export stream (--via-export)
#        KERNCAP_BENCH_ONLY=p8v  run P8v only (validate / restore, both paths)
#        KERNCAP_BENCH_VALIDATE_GIB  P8v capture size in GiB (default 8; needs ~2x in RAM, 1x on disk)
#        KERNCAP_BENCH_SERVE_GIB        P5b state size (default 1)
#        KERNCAP_BENCH_SERVE_CANDIDATES P5b evaluations (default 20)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${1:-${OUT:-$PWD/bench-logs}}
BUDGET=${KERNCAP_BENCH_BUDGET_S:-420}
WORK=${KERNCAP_BENCH_DIR:-/tmp/kc-bench}
SIZES=${KERNCAP_BENCH_SIZES:-"8 32"}
LAUNCHES=${KERNCAP_BENCH_LAUNCHES:-1000000}
P5_REPS=${KERNCAP_BENCH_P5_REPS:-7}
P5_CPU=${KERNCAP_BENCH_P5_CPU:-2}
P5_PRELOAD=${KERNCAP_BENCH_P5_PRELOAD:-0}
ONLY=${KERNCAP_BENCH_ONLY:-}
SERVE_GIB=${KERNCAP_BENCH_SERVE_GIB:-1}
P1D_GIB=${KERNCAP_BENCH_P1D_GIB:-24}
VALIDATE_GIB=${KERNCAP_BENCH_VALIDATE_GIB:-8}
[[ $ONLY == p1d || $ONLY == p8v ]] && P5_REPS=0
SERVE_CANDIDATES=${KERNCAP_BENCH_SERVE_CANDIDATES:-20}
mkdir -p "$LOGS"
RESULTS=$LOGS/results.jsonl
: > "$RESULTS"
START=$SECONDS
BIN=$HERE/bin
GB=$HERE/gpu_bench
AGENT=$HERE/lib/libkerncap_agent.so

left() { echo $((BUDGET - (SECONDS - START))); }
# Seconds a step may take: what it wants, capped by what is left of the budget.
cap() { local l; l=$(left); ((l < $1)) && echo $((l > 1 ? l : 1)) || echo "$1"; }
note() { echo "[$((SECONDS - START))s] $*" | tee -a "$LOGS/run.log"; }
emit() { echo "$1" | tee -a "$RESULTS"; }

# Libraries: as run_gpu_tests.sh (the machine's CUPTI when it has one).
LIBS=$HERE/lib
for d in /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda*/lib64 \
         /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  if [[ -e $d/libcupti.so.13 ]]; then LIBS=$LIBS:$d; SYS_CUPTI=$d; break; fi
done
[[ -z ${SYS_CUPTI:-} ]] && LIBS=$LIBS:$HERE/lib/cupti
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ uname -a; nproc; free -g; df -h /tmp; nvidia-smi 2>&1 | head -15; } > "$LOGS/environment.txt" 2>&1

if [[ ! -x $GB/launch_rate_bench ]]; then
  echo "run_benchmarks.sh: no benchmark binaries in $GB (run deploy/gpu/bundle.sh)" >&2
  exit 2
fi
"$GB"/pinned_bw_bench --gib=0.01 --reps=1 > "$LOGS/probe.log" 2>&1
if [[ $? -eq 77 ]]; then
  cat "$LOGS/probe.log"
  echo "run_benchmarks.sh: no usable GPU here; nothing measured"
  exit 77
fi

rm -rf "$WORK"
mkdir -p "$WORK/tmp"
export TMPDIR=$WORK/tmp
DPID=""
SAMPLER=""

mem_kib() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

start_daemon() {  # NAME STAGING_GIB
  local d=$WORK/$1
  mkdir -p "$d"
  "$BIN"/kerncapd --store="$d/store" --socket="$d/ctl.sock" --agent-socket="$d/agent.sock" \
    --ring-slot-mib=64 --staging-gib="$2" --log-level=info > "$LOGS/kerncapd-$1.log" 2>&1 &
  DPID=$!
  for _ in $(seq 200); do [[ -S $d/ctl.sock ]] && return 0; sleep 0.1; done
  note "kerncapd $1 did not start"; tail -5 "$LOGS/kerncapd-$1.log"; return 1
}
stop_daemon() {
  [[ -z $DPID ]] && return
  kill -TERM "$DPID" 2>/dev/null
  for _ in $(seq 300); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DPID" 2>/dev/null
  wait "$DPID" 2>/dev/null
  DPID=""
}
# Samples RSS of kerncapd and of every process named capture_pause_bench.
start_sampler() {  # FILE
  (
    while true; do
      line="$(date +%s.%N) daemon $(mem_kib "$DPID" VmRSS) $(mem_kib "$DPID" RssAnon) $(mem_kib "$DPID" RssShmem)"
      for p in $(pgrep -f gpu_bench/capture_pause_bench); do
        line="$line app $(mem_kib "$p" VmRSS) $(mem_kib "$p" RssAnon) $(mem_kib "$p" RssShmem)"
      done
      echo "$line"
      sleep 0.2
    done
  ) > "$1" 2>/dev/null &
  SAMPLER=$!
}
stop_sampler() { [[ -n $SAMPLER ]] && kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; SAMPLER=""; }
cleanup() { stop_sampler; stop_daemon; rm -rf "$WORK"; }
trap cleanup EXIT
ctl() { local n=$1; shift; "$BIN"/kerncapctl --socket="$WORK/$n/ctl.sock" "$@"; }
wait_capture() {  # NAME TIMEOUT_S -> prints the capture id
  local n=$1 t=$2 id=""
  for _ in $(seq $((t * 5))); do
    id=$(ctl "$n" captures -q 2>/dev/null | head -1)  # newest first
    [[ -n $id ]] && break
    sleep 0.2
  done
  echo "$id"
}
avail_gib() { awk '/MemAvailable/ {printf "%d", $2 / 1048576}' /proc/meminfo; }
start_daemon_default() {  # NAME: kerncapd at its default staging and ring settings
  local d=$WORK/$1
  mkdir -p "$d"
  "$BIN"/kerncapd --store="$d/store" --socket="$d/ctl.sock" --agent-socket="$d/agent.sock" \
    --log-level=info > "$LOGS/kerncapd-$1.log" 2>&1 &
  DPID=$!
  for _ in $(seq 200); do [[ -S $d/ctl.sock ]] && return 0; sleep 0.1; done
  note "kerncapd $1 did not start"; tail -5 "$LOGS/kerncapd-$1.log"; return 1
}

# ---------------------------------------------------------------- P8v
if [[ -z $ONLY || $ONLY == p8v ]] && [[ -x $GB/validate_bench ]]; then
  if (( $(left) < 60 )); then
    note "budget exhausted before P8v"
  else
    note "P8v: validate / restore, $VALIDATE_GIB GiB capture, host and device comparison paths"
    timeout "$(cap 300)" "$GB"/validate_bench --gib="$VALIDATE_GIB" --replay="$BIN"/kerncap-replay \
      --dir="$WORK/tmp" > "$LOGS/p8v_validate.log" 2>&1
    note "validate_bench exit $?"
    grep -v '^BENCH_JSON' "$LOGS/p8v_validate.log" | tee -a "$LOGS/run.log"
    grep -h '^BENCH_JSON' "$LOGS/p8v_validate.log" | sed 's/^BENCH_JSON //' >> "$RESULTS"
  fi
fi
[[ $ONLY == p8v ]] && SIZES=""

# ---------------------------------------------------------------- P1-default / P2
if [[ -z $ONLY || $ONLY == p1d ]] && [[ -x $GB/snapshot_pause_bench ]]; then
  # What bounds the host path on this machine: with bounded staging, a first
  # capture's new pre image must be absorbed by kerncapd's store (SHA-256,
  # compression, pack writes) before the dispatch may run. Two references:
  # the store's ingest of incompressible bytes, its commit's fdatasync
  # included, and the disk's durable write rate. They are not a strict floor
  # for the pause, which ends before the commit and so may ride on the page
  # cache above both.
  if [[ -x $GB/store_ingest_bench ]] && (( $(left) > 120 )); then
    note "P1d storage reference: the store's ingest of 8 GiB of random bytes (commit included), and the disk's durable write rate"
    timeout "$(cap 120)" "$GB"/store_ingest_bench --random --gib=8 --no_zstd --dir="$WORK" \
      > "$LOGS/p1d_storage_ingest.log" 2>&1
    dd if=/dev/zero of="$WORK/dd.bin" bs=64M count=64 conv=fdatasync 2> "$LOGS/p1d_storage_dd.log"
    rm -f "$WORK/dd.bin"
    python3 - "$LOGS" >> "$RESULTS" <<'PY'
import json, re, sys
logs = sys.argv[1]
row = {"bench": "p1d_storage_reference"}
for l in open(logs + "/p1d_storage_ingest.log"):
    if l.startswith('{"bench":"store_ingest"') or l.startswith('{"bench": "store_ingest"'):
        j = json.loads(l)
        row.update(store_random_committed_gbps=j["store_ingest1_gbps"], store_cpu_cores=j["store_ingest1_cpu_cores"],
                   cpus=j["cpus"])
m = re.search(r"copied, ([0-9.]+) s, ([0-9.]+) ([GM])B/s", open(logs + "/p1d_storage_dd.log").read())
if m:
    row["disk_durable_gbps"] = float(m.group(2)) / (1 if m.group(3) == "G" else 1000)
print(json.dumps(row))
PY
    tail -1 "$RESULTS" | tee -a "$LOGS/run.log"
  fi
  for variant in snapshot host; do
    name=p1d_$variant
    (( $(left) < 60 )) && { note "budget exhausted before P1d $variant"; break; }
    note "P1d/P2 ($variant path): $P1D_GIB GiB live, kernel writes 1%, kerncapd at defaults"
    start_daemon_default "$name" || break
    arm="$BIN/kerncapctl --socket=$WORK/$name/ctl.sock arm --kernel=kc_snap_touch --count=1"
    force=()
    [[ $variant == host ]] && force=(KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB=100000000)
    t0=$SECONDS
    timeout "$(cap 400)" env CUDA_INJECTION64_PATH="$AGENT" KERNCAP_AGENT_SOCKET="$WORK/$name/agent.sock" \
      KERNCAP_AGENT_EXIT_FLUSH_MS=120000 "${force[@]}" "$GB"/snapshot_pause_bench --gib="$P1D_GIB" \
      --arm-cmd="$arm" --host-path=$([[ $variant == host ]] && echo 1 || echo 0) --second=1 \
      > "$LOGS/$name.log" 2>&1
    note "snapshot_pause_bench ($variant) exit $? after $((SECONDS - t0)) s"
    grep -v '^BENCH_JSON' "$LOGS/$name.log" | grep -E "baseline|capture [12]|FAIL|SKIP" | tee -a "$LOGS/run.log"
    d_hwm=$(mem_kib "$DPID" VmHWM)
    # Both captures' manifests: path and sub-phase times (agent_timing).
    ctl "$name" --json captures > "$LOGS/$name-captures.json" 2>/dev/null
    for cid in $(grep -o '"capture_id": *"[^"]*"' "$LOGS/$name-captures.json" | sed 's/.*: *"//; s/"$//'); do
      ctl "$name" --json show "$cid" > "$LOGS/$name-show-$cid.json" 2>&1
    done
    python3 - "$LOGS" "$name" "$variant" "${d_hwm:-0}" >> "$RESULTS" <<'PY'
import glob, json, sys
logs, name, variant, d_hwm = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [json.loads(l[len("BENCH_JSON "):]) for l in open("%s/%s.log" % (logs, name))
        if l.startswith("BENCH_JSON ")]
timings = []
for f in glob.glob("%s/%s-show-*.json" % (logs, name)):
    try:
        m = json.load(open(f))
    except Exception:
        continue
    m = m.get("manifest", m)
    t = m.get("agent_timing") or m.get("agentTiming") or {}
    timings.append((m.get("created_unix_ms") or m.get("createdUnixMs") or 0, t))
timings = [t for _, t in sorted(timings, key=lambda x: int(x[0]))]
for r in rows:
    r["variant"] = variant
    r["daemon_vmhwm_kib"] = d_hwm
    i = 0 if r["bench"] == "p1_default" else 1
    if i < len(timings):
        r["agent_timing"] = timings[i]
    print(json.dumps(r))
PY
    stop_daemon
    rm -rf "${WORK:?}/$name"
  done
fi
[[ $ONLY == p1d ]] && SIZES=""

# ---------------------------------------------------------------- P5
if [[ $ONLY != p8v ]]; then
note "P5: launch rate, $LAUNCHES launches per run"
start_daemon p5 1 || exit 1
P5_MODES=("no_agent:"
          "agent_unarmed:CUDA_INJECTION64_PATH=$AGENT"
          "agent_unarmed_no_toggle:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_CALLBACK_TOGGLE=0"
          "agent_loaded_disabled:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_DISABLE=1")
# KERNCAP_BENCH_P5_DIAG=1: modes that tell where the unarmed cost comes from:
# the agent without the daemon link (no link threads), whole CUPTI domains
# (the subscription before this was measured), CUPTI subscribed with nothing
# enabled, and the agent unpinned (all cores, like an application).
if [[ ${KERNCAP_BENCH_P5_DIAG:-0} == 1 ]]; then
  P5_MODES+=("agent_no_link:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_NO_DAEMON=1"
             "agent_cupti_domains:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_CUPTI_DOMAINS=domains"
             "agent_cupti_none:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_CUPTI_DOMAINS=none"
             "agent_unarmed_unpinned:KC_UNPINNED=1 CUDA_INJECTION64_PATH=$AGENT"
             "no_agent_unpinned:KC_UNPINNED=1")
fi
[[ $P5_PRELOAD == 1 ]] && P5_MODES+=("agent_unarmed_preload:LD_PRELOAD=$AGENT")
# KERNCAP_BENCH_P5_MODES="label ...": only these modes (no_agent, the base, always).
if [[ -n ${KERNCAP_BENCH_P5_MODES:-} ]]; then
  kept=()
  for m in "${P5_MODES[@]}"; do
    [[ ${m%%:*} == no_agent || " $KERNCAP_BENCH_P5_MODES " == *" ${m%%:*} "* ]] && kept+=("$m")
  done
  P5_MODES=("${kept[@]}")
fi
# One core: the scheduler moving the launching thread between cores (and
# NUMA nodes) is a large part of the run-to-run noise.
PIN=()
command -v taskset > /dev/null && PIN=(taskset -c "$P5_CPU")
p5_run() {  # ROUND LABEL [ENV...]
  local round=$1 label=$2
  shift 2
  # shellcheck disable=SC2068  # the env assignments are words on purpose
  local pin=("${PIN[@]}")
  [[ " $* " == *" KC_UNPINNED=1 "* ]] && pin=()
  timeout "$(cap 60)" env KERNCAP_AGENT_SOCKET="$WORK/p5/agent.sock" $@ "${pin[@]}" \
    "$GB"/launch_rate_bench --launches="$LAUNCHES" --label="$label" > "$LOGS/p5-run.tmp" 2>&1
  cat "$LOGS/p5-run.tmp" >> "$LOGS/p5.log"
  # Tag the JSON line with its round, so ratios pair runs of the same round.
  grep -h '^BENCH_JSON' "$LOGS/p5-run.tmp" | sed "s/^BENCH_JSON {/{\"round\":$round,/" >> "$RESULTS"
}
n_modes=${#P5_MODES[@]}
for ((round = 1; round <= P5_REPS; round++)); do
  (( $(left) < 20 )) && { note "budget exhausted in P5 round $round"; break; }
  for ((k = 0; k < n_modes; k++)); do
    mode=${P5_MODES[$(((k + round) % n_modes))]}
    p5_run "$round" "${mode%%:*}" ${mode#*:}
  done
done
rm -f "$LOGS/p5-run.tmp"

# ---------------------------------------------------------------- P5g
note "P5g: graph launch rate, $((LAUNCHES / 10)) launches of 10 kernel nodes per run"
P5G_MODES=("no_agent:" "agent_unarmed:CUDA_INJECTION64_PATH=$AGENT")
# KERNCAP_BENCH_P5_DIAG=1: where a graph launch's unarmed cost comes from.
if [[ ${KERNCAP_BENCH_P5_DIAG:-0} == 1 ]]; then
  P5G_MODES+=("agent_loaded_disabled:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_DISABLE=1"
              "agent_cupti_none:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_CUPTI_DOMAINS=none"
              "agent_no_graph_ids:CUDA_INJECTION64_PATH=$AGENT KERNCAP_AGENT_GRAPH_TRACKING=0")
fi
# KERNCAP_BENCH_P5G_NODES="1 10 100": graphs of other sizes too (labels get
# "@N" for N other than 10), to tell a per-launch cost from a per-node one.
P5G_NODES=${KERNCAP_BENCH_P5G_NODES:-10}
p5g_run() {  # ROUND LABEL NODES [ENV...]
  local round=$1 label=$2 nodes=$3
  shift 3
  [[ $nodes != 10 ]] && label="$label@$nodes"
  # shellcheck disable=SC2068
  timeout "$(cap 60)" env KERNCAP_AGENT_SOCKET="$WORK/p5/agent.sock" $@ "${PIN[@]}" \
    "$GB"/launch_rate_bench --launches="$LAUNCHES" --graph-nodes="$nodes" --label="$label" \
    > "$LOGS/p5g-run.tmp" 2>&1
  cat "$LOGS/p5g-run.tmp" >> "$LOGS/p5g.log"
  grep -h '^BENCH_JSON' "$LOGS/p5g-run.tmp" | sed "s/^BENCH_JSON {/{\"round\":$round,/" >> "$RESULTS"
}
for ((round = 1; round <= P5_REPS; round++)); do
  (( $(left) < 20 )) && { note "budget exhausted in P5g round $round"; break; }
  for ((k = 0; k < ${#P5G_MODES[@]}; k++)); do
    mode=${P5G_MODES[$(((k + round) % ${#P5G_MODES[@]}))]}
    for nodes in $P5G_NODES; do
      p5g_run "$round" "${mode%%:*}" "$nodes" ${mode#*:}
    done
  done
done
rm -f "$LOGS/p5g-run.tmp"
stop_daemon
grep -h "launches/s" "$LOGS/p5.log" "$LOGS/p5g.log" 2>/dev/null | tee -a "$LOGS/run.log"
fi  # ONLY != p8v

# ---------------------------------------------------------------- P5b/serve
if [[ $ONLY != p5 && $ONLY != p1d && $ONLY != p8v && -x $GB/serve_bench ]]; then
  note "P5b/serve: resident-mode overhead, $SERVE_GIB GiB of state, $SERVE_CANDIDATES candidates"
  if (( $(left) < 40 )); then
    note "budget exhausted before P5b"
  else
    timeout "$(cap 180)" "$GB"/serve_bench --gib="$SERVE_GIB" --candidates="$SERVE_CANDIDATES" \
      --replay="$BIN"/kerncap-replay --dir="$WORK/tmp" > "$LOGS/p5b_serve.log" 2>&1
    note "serve_bench exit $?"
    grep -E "^(serve_bench|capture|set|default|no_restore|startup|FAIL|SKIP)" "$LOGS/p5b_serve.log" \
      | tee -a "$LOGS/run.log"
    grep -h '^BENCH_JSON' "$LOGS/p5b_serve.log" | sed 's/^BENCH_JSON //' >> "$RESULTS"
  fi
fi

# ---------------------------------------------------------------- P1 / P8 / memory
[[ $ONLY == p5 ]] && SIZES=""
for size in $SIZES; do
  name=p1_${size}
  # Staging holds the whole snapshot (pre + post) when memory allows; less
  # makes the pause longer (backpressure), never an out-of-memory failure.
  want=$((2 * size + 2))
  have=$(($(avail_gib) - 24))
  staging=$((want < have ? want : have))
  ((staging < 2)) && staging=2
  note "P1: $size GiB, staging $staging GiB (wanted $want, MemAvailable $(avail_gib) GiB)"
  (( $(left) < 30 )) && { note "budget exhausted before P1 $size GiB"; break; }
  start_daemon "$name" "$staging" || break
  start_sampler "$LOGS/mem-$name.txt"
  arm="$BIN/kerncapctl --socket=$WORK/$name/ctl.sock arm --kernel=kc_bench_touch --count=1"
  t0=$SECONDS
  also_graph=0
  [[ $size == "${SIZES%% *}" ]] && also_graph=1
  timeout "$(cap 240)" env CUDA_INJECTION64_PATH="$AGENT" KERNCAP_AGENT_SOCKET="$WORK/$name/agent.sock" \
    KERNCAP_AGENT_EXIT_FLUSH_MS=120000 "$GB"/capture_pause_bench --gib="$size" --arm-cmd="$arm" \
    --also-graph="$also_graph" > "$LOGS/$name.log" 2>&1
  rc=$?
  note "capture_pause_bench $size GiB exit $rc after $((SECONDS - t0)) s"
  grep -v '^BENCH_JSON' "$LOGS/$name.log" | grep -E "baseline|capture:|graph|memory|ring|FAIL|SKIP" | tee -a "$LOGS/run.log"
  json=$(grep -h '^BENCH_JSON {"bench":"p1_capture_pause"' "$LOGS/$name.log" | sed 's/^BENCH_JSON //')
  grep -h '^BENCH_JSON {"bench":"p1_graph_capture_pause"' "$LOGS/$name.log" | sed 's/^BENCH_JSON //' >> "$RESULTS"
  cid=$(wait_capture "$name" "$(cap 180)")  # the direct launch's capture comes first
  commit_s=$((SECONDS - t0))
  stop_sampler
  d_hwm=$(mem_kib "$DPID" VmHWM)
  peaks=$(awk '{for (i = 2; i <= NF; i += 4) { k = $i; if ($(i+1) > r[k]) r[k] = $(i+1);
                 if ($(i+2) > a[k]) a[k] = $(i+2); if ($(i+3) > s[k]) s[k] = $(i+3) } }
               END { printf "\"daemon_peak_rss_kib\":%d,\"daemon_peak_anon_kib\":%d,\"daemon_peak_shmem_kib\":%d,\"app_peak_rss_kib\":%d,\"app_peak_anon_kib\":%d,\"app_peak_shmem_kib\":%d",
                     r["daemon"], a["daemon"], s["daemon"], r["app"], a["app"], s["app"] }' \
             "$LOGS/mem-$name.txt")
  [[ -n $json ]] && emit "${json%\}},\"staging_gib\":$staging,\"capture_id\":\"$cid\",\"committed_within_s\":$commit_s,\"daemon_vmhwm_kib\":${d_hwm:-0},$peaks}"
  [[ -z $cid ]] && note "no capture committed for $size GiB (see $LOGS/kerncapd-$name.log)"
  ctl "$name" show "$cid" > "$LOGS/show-$name.txt" 2>&1

  if [[ -n $cid && $size == "${SIZES%% *}" ]]; then
    note "P8: replay restore of $cid ($size GiB) from kerncapd (its store when readable) vs pinned H2D"
    timeout "$(cap 60)" "$GB"/pinned_bw_bench --gib=4 --reps=3 > "$LOGS/p8_pinned.log" 2>&1
    t1=$SECONDS
    timeout "$(cap 200)" "$BIN"/kerncap-replay run --json --daemon="unix:$WORK/$name/ctl.sock" "$cid" \
      > "$LOGS/p8_replay.json" 2> "$LOGS/p8_replay.stderr"
    rc=$?
    note "kerncap-replay exit $rc after $((SECONDS - t1)) s (open + restore + launch): $(grep -h 'kerncap-replay: ' "$LOGS/p8_replay.stderr" | head -1)"
    p8_wall=$((SECONDS - t1))
    if [[ ${KERNCAP_BENCH_P8_EXPORT:-0} == 1 ]]; then
      t2=$SECONDS
      timeout "$(cap 200)" "$BIN"/kerncap-replay run --json --via-export \
        --daemon="unix:$WORK/$name/ctl.sock" "$cid" > "$LOGS/p8_replay_export.json" \
        2> "$LOGS/p8_replay_export.stderr"
      rc=$?
      echo "$((SECONDS - t2))" > "$LOGS/p8_replay_export.wall"
      note "kerncap-replay --via-export exit $rc after $((SECONDS - t2)) s"
    fi
    # The same replay with the physical mapping done before the upload (the
    # previous design), for the record of what overlapping them gains.
    KERNCAP_REPLAY_SERIAL_MAP=1 timeout "$(cap 200)" "$BIN"/kerncap-replay run --json \
      --daemon="unix:$WORK/$name/ctl.sock" "$cid" > "$LOGS/p8_replay_serial.json" \
      2> "$LOGS/p8_replay_serial.stderr"
    pj=$(grep -h '^BENCH_JSON' "$LOGS/p8_pinned.log" | sed 's/^BENCH_JSON //')
    [[ -n $pj ]] && emit "$pj"
    if command -v python3 > /dev/null; then
      python3 - "$LOGS/p8_replay.json" "$pj" "$p8_wall" <<'PY' | tee -a "$RESULTS"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    p = json.loads(sys.argv[2])
except Exception as e:
    print(json.dumps({"bench": "p8_replay_restore", "error": str(e)}))
    sys.exit(0)
b, s = r.get("restored_bytes", 0), r.get("restore_seconds", 0)
gbps = b / s / 1e9 if s else 0
phases = {k: r.get(k) for k in ("upload_seconds", "upload_gbps", "map_seconds", "map_wait_seconds",
                                "staging_seconds", "init_seconds", "reserve_seconds", "code_seconds")}
try:
    serial = json.load(open(sys.argv[1].replace(".json", "_serial.json")))
    ss = serial.get("restore_seconds", 0)
    phases["serial_map_restore_gbps"] = round(serial.get("restored_bytes", 0) / ss / 1e9, 3) if ss else None
except Exception:
    pass
try:  # KERNCAP_BENCH_P8_EXPORT=1: the same replay through the export stream
    ex = json.load(open(sys.argv[1].replace(".json", "_export.json")))
    es = ex.get("restore_seconds", 0)
    phases["export_restore_gbps"] = round(ex.get("restored_bytes", 0) / es / 1e9, 3) if es else None
    phases["export_wall_seconds"] = int(open(sys.argv[1].replace(".json", "_export.wall")).read())
except Exception:
    pass
print(json.dumps({"bench": "p8_replay_restore", "restored_bytes": b, "restore_seconds": s,
                  "source": r.get("source", "export"),
                  "restore_gbps": round(gbps, 3), "pinned_h2d_gbps": p.get("h2d_gbps"),
                  "ratio": round(gbps / p["h2d_gbps"], 4) if p.get("h2d_gbps") else None,
                  "target": 0.5, "wall_seconds_incl_fetch": int(sys.argv[3]),
                  "relocated": r.get("relocated"), **phases}))
PY
    fi
  fi
  stop_daemon
  rm -rf "${WORK:?}/$name"
done

# ---------------------------------------------------------------- summary
note "done in $((SECONDS - START)) s"
if command -v python3 > /dev/null; then
  python3 - "$RESULTS" <<'PY' | tee "$LOGS/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
import statistics
# P5: per round, agent run / no-agent run of the same round; median of those.
runs = {}
for r in rows:
    if r.get("bench") == "p5_launch_rate":
        runs.setdefault(r["label"], {})[r.get("round", 0)] = r["launches_per_second"]
print("%-44s %14s %10s %8s" % ("figure", "value", "ratio", "target"))
base = runs.get("no_agent", {})
# P5g: graph launches, same pairing by round.
graph_runs = {}
for r in rows:
    if r.get("bench") == "p5_graph_launch_rate":
        graph_runs.setdefault(r["label"], {})[r.get("round", 0)] = r["graph_launches_per_second"]
gbase = graph_runs.get("no_agent", {})
gratios = [v / gbase[k] for k, v in sorted(graph_runs.get("agent_unarmed", {}).items()) if gbase.get(k)]
if gratios:
    gmed = statistics.median(gratios)
    print("%-44s %14s %10.3f %8s" % ("P5g graph launch rate, unarmed / no agent", "%.0f/%.0f /s" % (
          statistics.median(graph_runs["agent_unarmed"].values()), statistics.median(gbase.values())),
          gmed, ">=0.97"))
    print("%-44s %14s" % ("   per-round ratios (median taken)", " ".join("%.3f" % x for x in gratios)))
    for label in sorted(graph_runs):
        if label in ("no_agent", "agent_unarmed"):
            continue
        nodes = label.partition("@")[2]
        lbase = graph_runs.get("no_agent@" + nodes, {}) if nodes else gbase
        rs = [v / lbase[k] for k, v in sorted(graph_runs[label].items()) if lbase.get(k)]
        if rs and label.partition("@")[0] != "no_agent":
            print("%-44s %14s %10.3f" % ("   P5g %s / no agent" % label, "", statistics.median(rs)))
    print(json.dumps({"bench": "p5g_summary", "median_ratio": round(gmed, 4),
                      "ratios": [round(x, 4) for x in gratios], "target": 0.97}),
          file=open(sys.argv[1], "a"))
for label, title in (("agent_unarmed", "P5 launch rate, unarmed / no agent (inject)"),
                     ("agent_unarmed_no_toggle", "P5 same, every driver callback kept on"),
                     ("agent_loaded_disabled", "   (injection, agent disabled) / no agent"),
                     ("agent_unarmed_preload", "P5 launch rate, unarmed / no agent (preload)"),
                     ("agent_no_link", "   diag: agent without the daemon link"),
                     ("agent_cupti_domains", "   diag: whole CUPTI domains (before)"),
                     ("agent_cupti_none", "   diag: CUPTI subscribed, nothing enabled"),
                     ("agent_unarmed_unpinned", "   diag: agent, unpinned (vs pinned base)"),
                     ("no_agent_unpinned", "   diag: no agent, unpinned (vs pinned base)")):
    ratios = [v / base[k] for k, v in sorted(runs.get(label, {}).items()) if base.get(k)]
    if ratios:
        med = statistics.median(ratios)
        print("%-44s %14s %10.3f %8s" % (title, "%.0f/%.0f /s" % (
              statistics.median(runs[label].values()), statistics.median(base.values())),
              med, ">=0.97"))
        print("%-44s %14s" % ("   per-round ratios (median taken)",
              " ".join("%.3f" % x for x in ratios)))
        print(json.dumps({"bench": "p5_summary", "label": label, "median_ratio": round(med, 4),
                          "ratios": [round(x, 4) for x in ratios], "target": 0.97}),
              file=open(sys.argv[1], "a"))
for r in rows:
    if r.get("bench") == "p1_capture_pause":
        gib = r["gib"]
        print("%-44s %14s %10.3f %8s" % ("P1 pause %g GiB (launch call / pinned D2H)" % gib,
              "%.3f/%.3f s" % (r["launch_call_seconds"], r["baseline_seconds_same_bytes"]),
              r["ratio"], "<=1.25"))
        print("%-44s %14s" % ("   pre+post bytes, D2H GB/s, staging GiB",
              "%.1f GiB %.1f %d" % ((r["pre_bytes"] + r["post_bytes"]) / 2**30, r["d2h_gbps"],
                                    r.get("staging_gib", 0))))
        print("%-44s %14s" % ("   app VmHWM / peak anon (GiB)", "%.2f / %.2f" % (
              r["app_vmhwm_kib"] / 2**20, r.get("app_peak_anon_kib", 0) / 2**20)))
        print("%-44s %14s" % ("   kerncapd VmHWM / peak anon (GiB)", "%.2f / %.2f" % (
              r.get("daemon_vmhwm_kib", 0) / 2**20, r.get("daemon_peak_anon_kib", 0) / 2**20)))
        print("%-44s %14s" % ("   committed within (s of app start)", r.get("committed_within_s")))
    if r.get("bench") == "p1_graph_capture_pause":
        print("%-44s %14s %10.3f %8s" % ("P1g pause %g GiB, graph node / direct launch" % r["gib"],
              "%.3f/%.3f s" % (r["graph_launch_call_seconds"], r["direct_launch_call_seconds"]),
              r["ratio_to_direct"], "-"))
        print("%-44s %14s" % ("   graph nodes, pre+post bytes", "%d, %.1f GiB" % (
              r["graph_nodes"], (r["pre_bytes"] + r["post_bytes"]) / 2**30)))
    if r.get("bench") == "p8_replay_restore" and r.get("ratio") is not None:
        print("%-44s %14s %10.3f %8s" % ("P8 replay restore / pinned H2D",
              "%.2f/%.1f GB/s" % (r["restore_gbps"], r["pinned_h2d_gbps"]), r["ratio"], ">=0.5"))
        # store:<dir> = read kerncapd's store directly; export = gRPC stream to a temp .kcap
        print("%-44s %14s" % ("   source, wall s (open + restore + launch)",
              "%s, %s" % (r.get("source", "?"), r.get("wall_seconds_incl_fetch"))))
        if r.get("export_wall_seconds") is not None:
            print("%-44s %14s" % ("   --via-export: wall s, restore GB/s",
                  "%s, %s" % (r["export_wall_seconds"], r.get("export_restore_gbps"))))
    if r.get("bench") in ("p1_default", "p2_second_capture"):
        t = r.get("agent_timing", {})
        v = r.get("variant", "?")
        if r["bench"] == "p1_default":
            host = v == "host"
            ratio = r["ratio_vs_pre_changed_d2h"] if host else r["ratio_vs_live_d2h"]
            base = r["baseline_pre_changed_seconds"] if host else r["baseline_live_seconds"]
            print("%-44s %14s %10.3f %8s" % ("P1d pause %g GiB, %s path (/ pinned D2H%s)" % (
                  r["gib"], t.get("path", v), " pre+changed" if host else " live"),
                  "%.3f/%.3f s" % (r["pause_seconds"], base), ratio, "<=1.2" if host else "<=0.1"))
            print("%-44s %14s" % ("   app VmHWM / kerncapd VmHWM (GiB)", "%.2f / %.2f" % (
                  r.get("app_vmhwm_kib", 0) / 2**20, r.get("daemon_vmhwm_kib", 0) / 2**20)))
        else:
            print("%-44s %14s %10.3f %8s" % ("P2 second capture pause / first (%s)" % v,
                  "%.3f/%.3f s" % (r["pause_seconds"], r["first_pause_seconds"]),
                  r["ratio_vs_first"], "<=0.05"))
        if t:
            print("%-44s %14s" % ("   quiesce/pre/post/drain s, held s", "%.3f/%.3f/%.3f/%.3f, %.3f" % (
                  t.get("quiesce_seconds", 0), t.get("pre_seconds", 0), t.get("post_seconds", 0),
                  t.get("drain_seconds", 0), t.get("held_seconds", 0))))
            print("%-44s %14s" % ("   PCIe GiB / unchanged post GiB", "%.3f / %.3f" % (
                  int(t.get("pcie_bytes", 0)) / 2**30, int(t.get("unchanged_post_bytes", 0)) / 2**30)))
            if t.get("path_reason"):
                print("%-44s %s" % ("   path reason", t["path_reason"]))
    if r.get("bench") == "p8v_validate":
        for path in ("device", "host"):
            p = r.get(path)
            if not p:
                continue
            c = p.get("comparison", {})
            print("%-44s %14s %10.3f %8s" % ("P8v validate / restore %g GiB, %s path" % (r["gib"], path),
                  "%.3f/%.3f s" % (p["validate_seconds"], p["restore_seconds"]), p["ratio"],
                  "<=2" if path == "device" else "-"))
            print("%-44s %14s" % ("   expect/launch/compare s, ran on, result", "%.3f/%.4f/%.3f, %s, %s" % (
                  c.get("expectation_seconds", 0), p.get("launch_ms", 0) / 1000.0,
                  c.get("compare_seconds", 0), c.get("path"), p.get("result"))))
    if r.get("bench") == "p5b_serve":
        print("%-44s %14s %10s %8s" % ("P5b serve overhead per candidate, %.2g GiB" % r["state_gib"],
              "%.3f ms" % r["overhead_ms_median"], "-", "<=5 ms"))
        print("%-44s %14s" % ("   kernel ms / no-restore overhead ms",
              "%.4f / %.3f" % (r["default_kernel_ms_median"],
                               r.get("no_restore_each_overhead_ms_median", 0))))
PY
fi
exit 0
