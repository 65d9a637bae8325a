#!/usr/bin/env bash
# slurm_cluster.sh: a real Slurm (Debian's slurm-wlm: slurmctld, slurmd, munge)
# on this machine for tests, every file of it under one directory.
#
#   slurm_cluster.sh start DIR [NODES]   munged + slurmctld + NODES slurmd (default 2),
#                                        waits until every node is idle
#   slurm_cluster.sh stop DIR            stops them (TERM, then KILL) and says so
#   slurm_cluster.sh env DIR             prints `export SLURM_CONF=...` for clients
#   slurm_cluster.sh check               exit 0 when it can run here, else 77 and why
#
# Several nodes on one host: Debian's slurmd takes `-N NAME`, and each NodeName
# line gets its own Port=, so every node is its own slurmd process (no network
# namespaces). Each simulated node also gets a "local" directory DIR/nodes/NAME
# for what a real node keeps on local disk (kerncap's run dir and store), which
# the prolog/epilog wrappers below point kerncap at.
#
# Hooks (optional, environment of `start`):
#   KC_SLURM_PROLOG / KC_SLURM_EPILOG / KC_SLURM_TASK_PROLOG  scripts slurmd runs
#   KC_SLURM_PROLOG_ENV   lines "VAR=value" the hook wrappers export before running
#                         the hook, after KERNCAP_NODE_DIR (DIR/nodes/$SLURMD_NODENAME),
#                         so a value may use $KERNCAP_NODE_DIR
#
# Nothing here touches the system's own munge or Slurm: munged has its own key
# and socket, slurm.conf its own ports, state and spool under DIR.
set -euo pipefail

die() { echo "slurm_cluster: $*" >&2; exit 1; }

check() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "slurm_cluster: needs root (slurmd runs jobs as their users)"; return 77
  fi
  for b in munged slurmctld slurmd srun sbatch scontrol squeue; do
    if ! command -v "$b" >/dev/null 2>&1; then
      echo "slurm_cluster: $b is not installed (deploy/install_deps.sh installs slurmctld slurmd slurm-client munge)"
      return 77
    fi
  done
  return 0
}

# A free TCP port at or above $1 with $2 free ports after it.
free_ports() {
  python3 - "$@" <<'EOF'
import random, socket, sys
need = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - need)
    ok = True
    for p in range(base, base + need):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            s.close()
        if not ok:
            break
    if ok:
        print(base)
        sys.exit(0)
sys.exit("no free port range")
EOF
}

write_hook_wrapper() {  # NAME TARGET: DIR/hooks/NAME runs TARGET with KC_SLURM_PROLOG_ENV set
  local name="$1" target="$2" w="$DIR/hooks/$1"
  {
    echo '#!/usr/bin/env bash'
    echo "# Written by slurm_cluster.sh: the test's paths, then the real hook."
    printf 'export KERNCAP_NODE_DIR=%q/nodes/"$SLURMD_NODENAME"\n' "$DIR"
    if [ -n "${KC_SLURM_PROLOG_ENV:-}" ]; then
      while IFS= read -r line; do
        [ -n "$line" ] && printf 'export %s\n' "$line"
      done <<<"$KC_SLURM_PROLOG_ENV"
    fi
    printf 'exec %q "$@"\n' "$target"
  } >"$w"
  chmod 0755 "$w"
  echo "$w"
}

start() {
  local nodes="${NODES:-2}"
  [ -d "$DIR" ] || mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  chmod 0755 "$DIR"
  mkdir -p "$DIR"/{munge,state,log,hooks,spool}
  chmod 0700 "$DIR/munge"
  local base; base="$(free_ports $((nodes + 1)))"
  local ctld_port="$base"

  # munge: a key of our own, a socket of our own.
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$DIR/munge/munge.key"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.sock" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munge.seed" || die "munged did not start (see $DIR/log/munged.log)"
  chmod 0755 "$DIR/munge"  # clients (any user) must reach the socket

  local cpus; cpus="$(nproc)"
  local mem_mb; mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / (nodes + 1) ))
  local prolog="" epilog="" task_prolog=""
  [ -n "${KC_SLURM_PROLOG:-}" ] && prolog="$(write_hook_wrapper prolog "$KC_SLURM_PROLOG")"
  [ -n "${KC_SLURM_EPILOG:-}" ] && epilog="$(write_hook_wrapper epilog "$KC_SLURM_EPILOG")"
  [ -n "${KC_SLURM_TASK_PROLOG:-}" ] && task_prolog="$(write_hook_wrapper task_prolog "$KC_SLURM_TASK_PROLOG")"

  cat >"$DIR/slurm.conf" <<EOF
# Written by tests/slurm/slurm_cluster.sh for one test run.
ClusterName=kerncaptest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
PrologFlags=Alloc
${prolog:+Prolog=$prolog}
${epilog:+Epilog=$epilog}
${task_prolog:+TaskProlog=$task_prolog}
EOF
  local i names=()
  for i in $(seq 1 "$nodes"); do
    local n="kc$i"
    names+=("$n")
    mkdir -p "$DIR/spool/$n" "$DIR/nodes/$n"
    chmod 0755 "$DIR/nodes/$n"
    echo "NodeName=$n NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$((base + i)) CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN" >>"$DIR/slurm.conf"
  done
  echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >>"$DIR/slurm.conf"
  echo "${names[*]}" >"$DIR/nodes.txt"

  export SLURM_CONF="$DIR/slurm.conf"
  slurmctld -i -f "$SLURM_CONF" || die "slurmctld did not start (see $DIR/log/slurmctld.log)"
  for n in "${names[@]}"; do
    slurmd -N "$n" -f "$SLURM_CONF" || die "slurmd $n did not start (see $DIR/log/slurmd.$n.log)"
  done
  # Wait until every node is idle (slurmd registered with slurmctld).
  local t
  for t in $(seq 1 120); do
    local idle
    idle="$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle" {c++} END {print c+0}')"
    if [ "$idle" -eq "$nodes" ]; then
      echo "slurm_cluster: up in $DIR: slurmctld on port $ctld_port, nodes ${names[*]}"
      return 0
    fi
    sleep 0.5
  done
  sinfo -N >&2 || true
  die "nodes did not come up idle within 60 s (logs in $DIR/log)"
}

stop_pidfile() {  # FILE NAME
  local f="$1" name="$2" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f" 2>/dev/null || true)"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  local t
  for t in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
    sleep 0.1
  done
  echo "slurm_cluster: $name (pid $pid) did not stop on TERM in 10 s; KILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

stop() {
  [ -d "$DIR" ] || return 0
  DIR="$(cd "$DIR" && pwd)"
  if [ -f "$DIR/slurm.conf" ] && [ -f "$DIR/slurmctld.pid" ]; then
    # Ends jobs first so their epilogs run while slurmd is still there.
    SLURM_CONF="$DIR/slurm.conf" scancel --quiet --partition=test 2>/dev/null || true
  fi
  local f
  for f in "$DIR"/slurmd.*.pid; do
    [ -e "$f" ] || continue
    local n="${f##*/slurmd.}"; n="${n%.pid}"
    stop_pidfile "$f" "slurmd $n"
  done
  stop_pidfile "$DIR/slurmctld.pid" slurmctld
  stop_pidfile "$DIR/munge/munged.pid" munged
}

cmd="${1:-}"
case "$cmd" in
  check) check; exit $? ;;
  start)
    [ $# -ge 2 ] || die "usage: slurm_cluster.sh start DIR [NODES]"
    check || exit $?
    DIR="$2"; NODES="${3:-2}"
    start ;;
  stop)
    [ $# -ge 2 ] || die "usage: slurm_cluster.sh stop DIR"
    DIR="$2"; stop ;;
  env)
    [ $# -ge 2 ] || die "usage: slurm_cluster.sh env DIR"
    printf 'export SLURM_CONF=%q\n' "$(cd "$2" && pwd)/slurm.conf" ;;
  *) die "usage: slurm_cluster.sh check | start DIR [NODES] | stop DIR | env DIR" ;;
esac
