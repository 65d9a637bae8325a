#!/usr/bin/env bash
# Slurm prolog: start kerncapd for jobs that ask for it (see README.md).
set -eu
case "${SLURM_JOB_COMMENT:-}" in *kerncap*) ;; *) exit 0 ;; esac
RUN_DIR="/run/kerncap/job-${SLURM_JOB_ID}"
STORE="${KERNCAP_STORE_ROOT:-/var/lib/kerncap}/job-${SLURM_JOB_ID}"
install -d -m 0750 -o "${SLURM_JOB_USER}" "$RUN_DIR"
install -d -m 0750 -o "${SLURM_JOB_USER}" "$STORE"
runuser -u "${SLURM_JOB_USER}" -- /usr/local/bin/kerncapd --store="$STORE" \
  --socket="$RUN_DIR/kerncapd.sock" --agent-socket="$RUN_DIR/agent.sock" \
  >"$RUN_DIR/kerncapd.log" 2>&1 &
echo $! >"$RUN_DIR/kerncapd.pid"
