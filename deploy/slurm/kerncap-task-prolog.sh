#!/usr/bin/env bash
# Slurm TaskProlog (the job's user, before every task, srun --overlap steps
# included): points the task's agent and kerncapctl at the job's own kerncapd
# (lines "export NAME=value" on stdout are how Slurm takes a task prolog's
# variables). Nothing when the prolog started no daemon for the job.
CONFIG="${KERNCAP_SLURM_CONFIG:-/etc/kerncap/slurm.env}"
# shellcheck disable=SC1090
[ -r "$CONFIG" ] && . "$CONFIG"
RUN_DIR="${KERNCAP_RUN_ROOT:-/run/kerncap}/job-${SLURM_JOB_ID:-none}"
[ -S "$RUN_DIR/kerncapd.sock" ] || exit 0
echo "export KERNCAP_SOCKET=$RUN_DIR/kerncapd.sock"
echo "export KERNCAP_AGENT_SOCKET=$RUN_DIR/agent.sock"
