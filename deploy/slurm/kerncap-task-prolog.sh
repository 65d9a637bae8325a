#!/usr/bin/env bash
# Slurm TaskProlog (the job's user, before every task, srun --overlap steps
# included): points the task's agent and kerncapctl at the job's own kerncapd
# (lines "export NAME=value" on stdout are how Slurm takes a task prolog's
# variables). Nothing when the prolog started no daemon for the job.
# shellcheck source=kerncap-job-env.sh
. "$(dirname "$0")/kerncap-job-env.sh"
[ -S "$RUN_DIR/kerncapd.sock" ] || exit 0
echo "export KERNCAP_SOCKET=$RUN_DIR/kerncapd.sock"
echo "export KERNCAP_AGENT_SOCKET=$RUN_DIR/agent.sock"
