#!/usr/bin/env bash
# Slurm epilog (root, on every node of a job, after its tasks ended): moves the
# job's captures into the store the user keeps before the node store goes
# (docs/CLUSTER.md).
#   1. waits for captures still being ingested;
#   2. as the job's user, pulls every capture into $KERNCAP_KEEP (kerncapctl
#      pull: only chunks the destination lacks travel) and verifies it there
#      (kerncapctl verify CAPTURE --rehash: every chunk re-hashed);
#   3. stops the job's kerncapd; removes the node store only when every
#      capture was pulled and verified. Otherwise the store stays, with
#      KEPT.txt saying why, and the user is told in
#      $SLURM_JOB_WORK_DIR/kerncap-epilog-JOB.NODE.txt (written as the user).
# It never fails the job; the node's log (logger) has the same lines.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin
# shellcheck source=kerncap-job-env.sh
. "$(dirname "$0")/kerncap-job-env.sh"
KEEP="${KERNCAP_KEEP:---context=keep}"
PULL_TIMEOUT="${KERNCAP_PULL_TIMEOUT:-600}"
JOB="${SLURM_JOB_ID:?}"
USER_NAME="${SLURM_JOB_USER:?}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
[ -f "$RUN_DIR/kerncapd.pid" ] || exit 0

LOG="$RUN_DIR/epilog.log"
say() {
  logger -t kerncap-epilog "job $JOB: $*" 2>/dev/null || true
  echo "$(date -u +%FT%TZ) $NODE job $JOB: $*" >>"$LOG"
}
as_user() { runuser -u "$USER_NAME" -- "$@"; }
node_ctl() { as_user "$BIN/kerncapctl" --socket="$RUN_DIR/kerncapd.sock" "$@"; }
# shellcheck disable=SC2086  # KEEP is a list of options
keep_ctl() { as_user timeout "$PULL_TIMEOUT" "$BIN/kerncapctl" $KEEP "$@"; }

PID="$(cat "$RUN_DIR/kerncapd.pid")"
ok=1
pulled=0
if kill -0 "$PID" 2>/dev/null; then
  # 1. No capture half-ingested (the daemon's drain bound is its own).
  for _ in $(seq 1 300); do
    st="$(node_ctl --timeout=5 --json status 2>/dev/null)" || break
    case "$st" in *'"ingests_in_flight":0'*|*'"ingests_in_flight": 0'*) break ;; esac
    case "$st" in *ingests_in_flight*) sleep 0.2 ;; *) break ;; esac
  done
  if ! ids="$(node_ctl --timeout=30 -q captures 2>>"$LOG")"; then
    say "cannot list the job's captures on $NODE; the node store stays"
    ok=0
  fi
  # 2. Pull and verify each.
  for id in ${ids:-}; do
    if ! keep_ctl -q pull "$id" --from "unix:$RUN_DIR/kerncapd.sock" >>"$LOG" 2>&1; then
      say "pull of $id to '$KEEP' failed"
      ok=0
      continue
    fi
    if ! keep_ctl verify "$id" --rehash >>"$LOG" 2>&1; then
      say "$id pulled but failed verification at '$KEEP'"
      ok=0
      continue
    fi
    pulled=$((pulled + 1))
    say "$id pulled and verified at '$KEEP'"
  done
else
  say "the job's kerncapd (pid $PID) was not running at the job's end; the node store stays"
  ok=0
fi

# 3. Stop the daemon (TERM: in-flight work finishes), then the store.
kill -TERM "$PID" 2>/dev/null
for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$PID" 2>/dev/null

REPORT="${SLURM_JOB_WORK_DIR:-}/kerncap-epilog-$JOB.$NODE.txt"
if [ "$ok" -eq 1 ]; then
  say "$pulled captures kept at '$KEEP'; node store $STORE removed"
  rm -rf "$STORE"
  rm -rf "$RUN_DIR"
else
  {
    echo "kerncap: job $JOB on $NODE: not every capture reached '$KEEP'."
    echo "The node store $STORE is kept; pull from it while the node is reachable, e.g."
    echo "  kerncapd --store=$STORE --socket=/tmp/kc.sock &  kerncapctl $KEEP pull ID --from unix:/tmp/kc.sock"
    echo "What happened:"
    cat "$LOG"
  } >"$STORE/KEPT.txt" 2>/dev/null
  chown "$USER_NAME" "$STORE/KEPT.txt" 2>/dev/null
  # Written as the user: a root epilog must not write into a user's folder.
  if [ -n "${SLURM_JOB_WORK_DIR:-}" ]; then
    as_user sh -c 'cat >"$1"' sh "$REPORT" <"$STORE/KEPT.txt" 2>/dev/null ||
      say "could not write $REPORT"
  fi
  say "node store $STORE kept (see $STORE/KEPT.txt)"
  mv "$LOG" "$STORE/epilog.log" 2>/dev/null
  rm -rf "$RUN_DIR"
fi
exit 0
