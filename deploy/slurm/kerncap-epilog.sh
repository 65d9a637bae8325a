#!/usr/bin/env bash
# Slurm epilog: stop the job's kerncapd gracefully; the store stays.
set -eu
RUN_DIR="/run/kerncap/job-${SLURM_JOB_ID}"
[ -f "$RUN_DIR/kerncapd.pid" ] || exit 0
PID="$(cat "$RUN_DIR/kerncapd.pid")"
kill -TERM "$PID" 2>/dev/null || exit 0
for _ in $(seq 1 60); do kill -0 "$PID" 2>/dev/null || break; sleep 1; done
rm -rf "$RUN_DIR"
