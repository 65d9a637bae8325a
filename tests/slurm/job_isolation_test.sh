#!/usr/bin/env bash
# job_isolation_test.sh: two users' jobs on one Slurm node, each with the
# per-job kerncapd that deploy/slurm's prolog starts (docs/CLUSTER.md,
# "Per-job daemons, isolation").
#
#   job_isolation_test.sh [BUILD_DIR]
#
# Checks: each job's daemon runs as its job's user; each user's fleet view
# lists only their own job's agent; another user can reach neither the job
# through srun (--slurm-job) nor its daemon's socket directly; an arm in one
# job captures nothing in the other. Creates two system users
# (kerncap-test-a, kerncap-test-b) when missing. Exit 0 pass, 1 fail, 77 skipped.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:-${KERNCAP_BUILD_DIR:-$REPO/build}}" && pwd)"
BIN="$BUILD/bin"
CLUSTER="$HERE/slurm_cluster.sh"

why="$("$CLUSTER" check)" || { echo "SKIPPED: $why"; exit 77; }
command -v useradd >/dev/null || { echo "SKIPPED: no useradd"; exit 77; }
for u in kerncap-test-a kerncap-test-b; do
  id "$u" >/dev/null 2>&1 ||
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u" ||
    { echo "FAIL: useradd $u"; exit 1; }
done
# The users run kerncapd and kerncapctl from the build tree.
p="$BIN"
while [ "$p" != / ]; do
  [ -x "$p" ] || { echo "SKIPPED: $p is not searchable by other users"; exit 77; }
  [ "$(( $(stat -c %a "$p") % 10 & 1 ))" -eq 1 ] ||
    { echo "SKIPPED: $p is not searchable by other users (mode $(stat -c %a "$p"))"; exit 77; }
  p="$(dirname "$p")"
done

DIR="$(mktemp -d /tmp/kerncap-slurm-iso.XXXXXX)"
chmod 0755 "$DIR"
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cleanup() {
  "$CLUSTER" stop "$DIR" >/dev/null 2>&1
  if [ "$failures" -eq 0 ] && [ -z "${KEEP_TEST_DIR:-}" ]; then rm -rf "$DIR"; else echo "kept: $DIR"; fi
}
trap cleanup EXIT

export KC_SLURM_PROLOG="$REPO/deploy/slurm/kerncap-prolog.sh"
export KC_SLURM_EPILOG="$REPO/deploy/slurm/kerncap-epilog.sh"
export KC_SLURM_TASK_PROLOG="$REPO/deploy/slurm/kerncap-task-prolog.sh"
# No keep store for these users: the epilog keeps their node stores (and says so).
export KC_SLURM_PROLOG_ENV="KERNCAP_SLURM_CONFIG=/nonexistent
KERNCAP_BIN_DIR=$BIN
KERNCAP_RUN_ROOT=\$KERNCAP_NODE_DIR/run
KERNCAP_STORE_ROOT=\$KERNCAP_NODE_DIR/store
KERNCAP_KEEP=--socket=/nonexistent/kerncapd.sock"
"$CLUSTER" start "$DIR" 1 || { echo "FAIL: cluster did not start"; exit 1; }
eval "$("$CLUSTER" env "$DIR")"

as() {  # USER CMD...: a login shell's worth of environment for a user without a home
  local u="$1"; shift
  runuser -u "$u" -- env HOME="$DIR/home-$u" SLURM_CONF="$SLURM_CONF" PATH="$PATH" "$@"
}
declare -A JOB
for u in kerncap-test-a kerncap-test-b; do
  install -d -o "$u" "$DIR/home-$u"
  JOB[$u]="$(as "$u" sbatch --parsable -N1 -n1 --comment=kerncap --chdir="$DIR/home-$u" \
    --output="$DIR/home-$u/job.out" --wrap "
srun $BIN/synthetic_agent --kernels=iso_kernel --dispatches=1000000 --dispatch-interval-ms=20 \
  --region-mib=0.25 >agent.out 2>&1 &
P=\$!
while [ ! -e $DIR/done ]; do sleep 0.2; done
kill \$P; wait; exit 0")" || { fail "sbatch as $u"; exit 1; }
done
A="${JOB[kerncap-test-a]}"; B="${JOB[kerncap-test-b]}"
echo "jobs: a=$A b=$B"

count_agents() {  # USER JOB -> number of agents in the fleet view (or "err")
  as "$1" "$BIN/kerncapctl" --json agents --slurm-job="$2" 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(x["result"]["agents"]) for x in d["nodes"] if x["ok"]))' 2>/dev/null ||
    echo err
}
for _ in $(seq 1 100); do
  [ "$(count_agents kerncap-test-a "$A")" = 1 ] && [ "$(count_agents kerncap-test-b "$B")" = 1 ] && break
  sleep 0.3
done
[ "$(count_agents kerncap-test-a "$A")" = 1 ] && [ "$(count_agents kerncap-test-b "$B")" = 1 ] &&
  pass "each user's fleet view of their job lists exactly their one agent" ||
  fail "agents: a=$(count_agents kerncap-test-a "$A") b=$(count_agents kerncap-test-b "$B")"

for u in kerncap-test-a kerncap-test-b; do
  j="${JOB[$u]}"
  pid="$(cat "$DIR/nodes/kc1/run/job-$j/kerncapd.pid" 2>/dev/null)"
  owner="$(ps -o user= -p "$pid" 2>/dev/null | tr -d ' ')"
  [ "$owner" = "$u" ] && pass "job $j's kerncapd runs as $u" || fail "job $j's kerncapd runs as '$owner'"
done

# B reaches for A's job: srun refuses the step, and the fleet says so.
out="$(as kerncap-test-b "$BIN/kerncapctl" --json agents --slurm-job="$A" 2>&1)"; rc=$?
[ "$rc" -ne 0 ] && [[ "$out" != *'"ok":true'* ]] &&
  pass "user b cannot reach job a through --slurm-job (exit $rc)" || fail "b reached a's job: $out"
# ... nor A's daemon socket directly.
out="$(as kerncap-test-b "$BIN/kerncapctl" --socket="$DIR/nodes/kc1/run/job-$A/kerncapd.sock" status 2>&1)"; rc=$?
[ "$rc" -eq 6 ] || [ "$rc" -eq 4 ] && pass "user b cannot open job a's socket (exit $rc)" ||
  fail "b opened a's socket: rc=$rc $out"

# An arm in A's job captures in A's daemon only.
as kerncap-test-a "$BIN/kerncapctl" --json arm --slurm-job="$A" --kernel=iso_kernel --count=1 >/dev/null
as kerncap-test-a "$BIN/kerncapctl" --json wait --slurm-job="$A" --wait-captures=1 --wait-timeout=60 >/dev/null &&
  pass "job a captured" || fail "job a: no capture"
sleep 1
nb="$(as kerncap-test-b "$BIN/kerncapctl" --json captures --slurm-job="$B" |
  python3 -c 'import json,sys; print(len(json.load(sys.stdin)["captures"]))')"
[ "$nb" = 0 ] && pass "job b's daemon holds none of job a's captures" || fail "job b holds $nb captures"

touch "$DIR/done"
for _ in $(seq 1 450); do
  [ -z "$(squeue -h -j "$A,$B" 2>/dev/null)" ] && break
  sleep 0.2
done
# No keep store was reachable: A's capture could not be pulled, so A's node
# store stays and A is told; B had no capture, so B's store is gone.
f="$DIR/home-kerncap-test-a/kerncap-epilog-$A.kc1.txt"
[ -f "$f" ] && [ "$(stat -c %U "$f")" = kerncap-test-a ] && [ -f "$DIR/nodes/kc1/store/job-$A/KEPT.txt" ] &&
  pass "job $A: the failed pull kept the node store and told its user" || fail "job $A: no kept store/report"
[ ! -e "$DIR/nodes/kc1/store/job-$B" ] && pass "job $B: empty node store removed" ||
  fail "job $B: node store left"

echo "$((failures == 0 ? 1 : 0)) passed, $((failures > 0 ? 1 : 0)) failed"
[ "$failures" -eq 0 ]
