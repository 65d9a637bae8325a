# kerncap-job-env.sh: sourced by the Slurm hooks (prolog, epilog, task
# prolog), never run. The one place that reads the site's settings
# ($KERNCAP_SLURM_CONFIG, default /etc/kerncap/slurm.env) and names where a
# job's kerncapd lives on a node:
#   BIN        kerncap's binaries            ($KERNCAP_BIN_DIR)
#   RUN_DIR    the job's sockets, pid, logs  ($KERNCAP_RUN_ROOT/job-ID)
#   STORE      the job's node-local store    ($KERNCAP_STORE_ROOT/job-ID)
# Install it beside the hooks (they source it from their own folder).
CONFIG="${KERNCAP_SLURM_CONFIG:-/etc/kerncap/slurm.env}"
# shellcheck disable=SC1090
[ -r "$CONFIG" ] && . "$CONFIG"
BIN="${KERNCAP_BIN_DIR:-/usr/local/bin}"
RUN_ROOT="${KERNCAP_RUN_ROOT:-/run/kerncap}"
STORE_ROOT="${KERNCAP_STORE_ROOT:-/var/lib/kerncap/jobs}"
RUN_DIR="$RUN_ROOT/job-${SLURM_JOB_ID:-none}"
STORE="$STORE_ROOT/job-${SLURM_JOB_ID:-none}"
