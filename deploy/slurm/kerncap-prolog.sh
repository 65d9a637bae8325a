#!/usr/bin/env bash
# Slurm prolog (root, on every node of a job; PrologFlags=Alloc runs it when
# the job starts): starts the job's own kerncapd, running as the job's user,
# with its sockets in a run directory only that user can enter and its store
# on node-local disk (docs/CLUSTER.md). Two jobs on a node get two daemons
# and never see each other's agents or captures.
#
# It never fails the job (a failing prolog drains the node): what went wrong
# goes to the node's log (logger) and to the run directory's prolog.log.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin
# shellcheck source=kerncap-job-env.sh
. "$(dirname "$0")/kerncap-job-env.sh"
JOB="${SLURM_JOB_ID:?}"
USER_NAME="${SLURM_JOB_USER:?}"

case "${KERNCAP_JOBS:-optin}" in
  all) ;;
  *) case "${SLURM_JOB_COMMENT:-}" in *kerncap*) ;; *) exit 0 ;; esac ;;
esac

say() { logger -t kerncap-prolog "job $JOB: $*" 2>/dev/null || true; echo "$*" >&2; }

if ! install -d -m 0755 "$RUN_ROOT" "$STORE_ROOT" ||
   ! install -d -m 0700 -o "$USER_NAME" "$RUN_DIR" ||
   ! install -d -m 0700 -o "$USER_NAME" "$STORE"; then
  say "cannot make $RUN_DIR or $STORE; no kerncapd for this job"
  exit 0
fi
# setsid: the daemon outlives the prolog (slurmd ends the prolog's process
# group); setpriv execs (runuser would fork, stay in that group and pass its
# SIGTERM on), so the pid recorded is the daemon's. The user's own groups.
setsid setpriv --reuid="$USER_NAME" --regid="$(id -g "$USER_NAME")" --init-groups \
  "$BIN/kerncapd" --store="$STORE" \
  --socket="$RUN_DIR/kerncapd.sock" --agent-socket="$RUN_DIR/agent.sock" \
  </dev/null >>"$RUN_DIR/kerncapd.log" 2>&1 &
echo $! >"$RUN_DIR/kerncapd.pid"
# Ready when the control socket answers (agents started right after the
# prolog must find it).
for _ in $(seq 1 100); do
  if runuser -u "$USER_NAME" -- "$BIN/kerncapctl" --socket="$RUN_DIR/kerncapd.sock" \
       --timeout=2 -q status >/dev/null 2>&1; then
    exit 0
  fi
  kill -0 "$(cat "$RUN_DIR/kerncapd.pid")" 2>/dev/null || break
  sleep 0.1
done
say "kerncapd did not come up (see $RUN_DIR/kerncapd.log)"
exit 0
