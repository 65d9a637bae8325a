#!/usr/bin/env bash
# cluster_job_test.sh: a multi-node Slurm job of synthetic agents, with
# kerncap's real prolog, task prolog and epilog (deploy/slurm), armed and
# listed from "the login node" through kerncapctl --slurm-job (docs/CLUSTER.md).
#
#   cluster_job_test.sh [BUILD_DIR]    (default: $KERNCAP_BUILD_DIR, else ./build)
#
# Checks: every node's per-job kerncapd is reached; an arm with --rank lands in
# the right rank's process on the right node; --nodes narrows to those nodes;
# a node whose kerncapd was killed and a node whose slurmd is frozen are
# reported by name within --node-timeout, not waited on; at the job's end the
# epilog pulls each node's captures into the user's keep store and verifies
# them, removes the node stores it emptied, and keeps (and says so) the store
# of the node whose daemon was killed. Exit 0 pass, 1 fail, 77 skipped.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:-${KERNCAP_BUILD_DIR:-$REPO/build}}" && pwd)"
BIN="$BUILD/bin"
CLUSTER="$HERE/slurm_cluster.sh"

why="$("$CLUSTER" check)" || { echo "SKIPPED: $why"; exit 77; }
for b in kerncapd kerncapctl synthetic_agent; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }
done

DIR="$(mktemp -d /tmp/kerncap-slurm-test.XXXXXX)"
chmod 0755 "$DIR"
LOGIN="$DIR/login"
mkdir -p "$LOGIN" "$DIR/jobdir"
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cleanup() {
  [ -n "${FROZEN:-}" ] && kill -CONT "$FROZEN" 2>/dev/null
  "$CLUSTER" stop "$DIR" >/dev/null 2>&1
  [ -f "$LOGIN/kerncapd.pid" ] && kill "$(cat "$LOGIN/kerncapd.pid")" 2>/dev/null
  if [ "$failures" -eq 0 ] && [ -z "${KEEP_TEST_DIR:-}" ]; then
    rm -rf "$DIR"
  else
    echo "test directory kept: $DIR"
  fi
}
trap cleanup EXIT

# "The login node": the kerncapd the user keeps captures in.
"$BIN/kerncapd" --store="$LOGIN/store" --socket="$LOGIN/kerncapd.sock" \
  --agent-socket="$LOGIN/agent.sock" >"$LOGIN/kerncapd.log" 2>&1 &
echo $! >"$LOGIN/kerncapd.pid"
LOGIN_CTL=("$BIN/kerncapctl" --socket="$LOGIN/kerncapd.sock")

export KC_SLURM_PROLOG="$REPO/deploy/slurm/kerncap-prolog.sh"
export KC_SLURM_EPILOG="$REPO/deploy/slurm/kerncap-epilog.sh"
export KC_SLURM_TASK_PROLOG="$REPO/deploy/slurm/kerncap-task-prolog.sh"
export KC_SLURM_PROLOG_ENV="KERNCAP_SLURM_CONFIG=/nonexistent
KERNCAP_BIN_DIR=$BIN
KERNCAP_RUN_ROOT=\$KERNCAP_NODE_DIR/run
KERNCAP_STORE_ROOT=\$KERNCAP_NODE_DIR/store
KERNCAP_KEEP=--socket=$LOGIN/kerncapd.sock"
"$CLUSTER" start "$DIR" 3 || { fail "cluster did not start"; exit 1; }
eval "$("$CLUSTER" env "$DIR")"
CTL=("$BIN/kerncapctl" --json)

# The job: 3 nodes x 2 tasks of synthetic agents (ranks 0-5 from SLURM_PROCID),
# running until the test says done.
JOB="$(sbatch --parsable -N3 --ntasks-per-node=2 --comment=kerncap --chdir="$DIR/jobdir" \
  --output="$DIR/jobdir/job.out" --wrap "
srun --kill-on-bad-exit=0 $BIN/synthetic_agent --kernels=matmul,softmax --dispatches=1000000 \
  --dispatch-interval-ms=20 --region-mib=1 >agents.out 2>&1 &
P=\$!
while [ ! -e $DIR/jobdir/done ]; do sleep 0.2; done
kill \$P; wait; exit 0")" || { fail "sbatch"; exit 1; }
echo "job $JOB"

# All six agents connected, seen through the fleet view.
agents_ok=0
for _ in $(seq 1 100); do
  if out="$("${CTL[@]}" agents --slurm-job="$JOB" 2>/dev/null)"; then
    n="$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sum(len(x["result"].get("agents",[])) for x in d["nodes"] if x["ok"]))' "$out")"
    [ "$n" -eq 6 ] && { agents_ok=1; break; }
  fi
  sleep 0.3
done
[ "$agents_ok" -eq 1 ] && pass "6 agents on 3 nodes seen with agents --slurm-job" ||
  { fail "agents did not all connect: ${out:-}"; cat "$DIR/jobdir/job.out" "$DIR/jobdir/agents.out" 2>/dev/null; exit 1; }

# Which node runs rank 3 (Slurm's block distribution: kc2), asked of the agents.
rank3_node="$(python3 -c '
import json,sys
d=json.loads(sys.argv[1])
print([x["node"] for x in d["nodes"] for a in x["result"]["agents"] if a.get("rank")==3][0])' "$out")"

# Arm rank 3 only, on every node; one capture comes back, from rank 3's node.
arm="$("${CTL[@]}" arm --slurm-job="$JOB" --kernel=matmul --rank=3 --count=1)"; rc=$?
[ "$rc" -eq 0 ] && python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["nodes_answered"]==3 and d["nodes_failed"]==[], d' "$arm" &&
  pass "arm --rank=3 reached 3 of 3 nodes" || fail "arm --rank=3: rc=$rc $arm"
caps="$("${CTL[@]}" wait --slurm-job="$JOB" --wait-captures=1 --kernel=matmul --wait-timeout=60)"; rc=$?
python3 -c '
import json,sys
d=json.loads(sys.argv[1])
c=[x for x in d["captures"] if x["kernel"]=="matmul"]
assert len(c)==1 and c[0]["rank"]==3 and c[0]["node"]==sys.argv[2], c' "$caps" "$rank3_node" &&
  pass "the rank-3 capture came from rank 3 on $rank3_node" || fail "rank-3 capture: rc=$rc $caps"

# --nodes: softmax on kc3 only; its capture comes from kc3's ranks (4, 5).
"${CTL[@]}" arm --slurm-job="$JOB" --nodes=kc3 --kernel=softmax --count=1 >/dev/null
caps="$("${CTL[@]}" wait --slurm-job="$JOB" --wait-captures=1 --kernel=softmax --wait-timeout=60)"
python3 -c '
import json,sys
d=json.loads(sys.argv[1])
c=[x for x in d["captures"] if x["kernel"]=="softmax"]
assert len(c)==1 and c[0]["node"]=="kc3" and c[0]["rank"] in (4,5), c' "$caps" &&
  pass "--nodes=kc3 armed kc3 only" || fail "--nodes=kc3: $caps"
# A node outside the job is refused by name.
err="$("${CTL[@]}" arm --slurm-job="$JOB" --nodes=kc9 --kernel=x 2>&1 >/dev/null)"; rc=$?
[ "$rc" -eq 2 ] && [[ "$err" == *"kc9 not in job"* ]] && pass "--nodes=kc9 refused: not in the job" ||
  fail "--nodes=kc9: rc=$rc $err"

# The human table groups by node and rank.
table="$("$BIN/kerncapctl" captures --slurm-job="$JOB")"
echo "$table"
[[ "$table" == *"NODE"*"RANK"* ]] && pass "captures --slurm-job table" || fail "table: $table"

# A killed node daemon and a frozen slurmd mid-arm: reported by name, in time.
KILLED_PID="$(cat "$DIR/nodes/kc1/run/job-$JOB/kerncapd.pid")"
kill -KILL "$KILLED_PID"
FROZEN="$(cat "$DIR/slurmd.kc3.pid")"
kill -STOP "$FROZEN"
t0=$(date +%s.%N)
arm="$("${CTL[@]}" arm --slurm-job="$JOB" --kernel=matmul --count=1 --node-timeout=8)"; rc=$?
t1=$(date +%s.%N)
kill -CONT "$FROZEN"; FROZEN=""
secs="$(python3 -c "print(round($t1-$t0,1))")"
python3 -c '
import json,sys
d=json.loads(sys.argv[1])
assert d["nodes_failed"]==["kc1","kc3"], d["nodes_failed"]
n={x["node"]:x for x in d["nodes"]}
assert n["kc2"]["ok"] and "no answer within" in n["kc3"]["error"]["message"], n
assert not n["kc1"]["ok"], n' "$arm" && [ "$rc" -eq 4 ] &&
  python3 -c "import sys; sys.exit(0 if $secs < 20 else 1)" &&
  pass "killed kc1 daemon and frozen kc3 slurmd reported (exit 4) in $secs s" ||
  fail "dead nodes: rc=$rc after $secs s: $arm"

# The job ends; the epilogs move the captures.
expected="$("${CTL[@]}" captures --slurm-job="$JOB" --nodes=kc2,kc3 |
  python3 -c 'import json,sys; print(" ".join(sorted(c["capture_id"] for c in json.load(sys.stdin)["captures"])))')"
touch "$DIR/jobdir/done"
for _ in $(seq 1 450); do
  [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break
  sleep 0.2
done
[ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] || fail "job $JOB did not end"
kept="$("${LOGIN_CTL[@]}" -q captures | sort | tr '\n' ' ' | sed 's/ $//')"
[ -n "$expected" ] && [ "$kept" == "$expected" ] &&
  pass "epilog pulled kc2+kc3's captures to the login store: $kept" ||
  fail "login store holds '$kept', expected '$expected'"
"${LOGIN_CTL[@]}" verify --rehash >/dev/null && pass "login store verifies (rehash)" ||
  fail "login store verify"
for n in kc2 kc3; do
  [ ! -e "$DIR/nodes/$n/store/job-$JOB" ] && [ ! -e "$DIR/nodes/$n/run/job-$JOB" ] &&
    pass "$n: node store and run dir removed" || fail "$n: node store left: $(ls "$DIR/nodes/$n/store")"
done
# kc1's daemon died: its store stays, and the user is told where and why.
[ -d "$DIR/nodes/kc1/store/job-$JOB" ] && [ -f "$DIR/nodes/kc1/store/job-$JOB/KEPT.txt" ] &&
  pass "kc1: node store kept with KEPT.txt" || fail "kc1: store not kept"
report="$DIR/jobdir/kerncap-epilog-$JOB.kc1.txt"
[ -f "$report" ] && grep -q "not running" "$report" && pass "kc1: the user's report says why" ||
  fail "kc1: no user report at $report"

echo "$((failures == 0 ? 1 : 0)) passed, $((failures > 0 ? 1 : 0)) failed"
[ "$failures" -eq 0 ]
