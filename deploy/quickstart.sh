#!/usr/bin/env bash
# One-command start on a fresh Debian 12 machine: installs dependencies,
# builds, starts a local kerncapd on its embedded defaults (store under
# $XDG_DATA_HOME or ~/.local/share, Unix socket under $XDG_RUNTIME_DIR or
# /tmp/kerncap-$UID, /run/kerncap and /var/lib/kerncap as root), then shows it
# working: a synthetic application is armed, captured, listed, shown and
# verified. kerncapd keeps running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install_deps.sh
bash deploy/build.sh
BIN="$(pwd)/${KERNCAP_BUILD_DIR:-build}/bin"
CTL="$BIN/kerncapctl"

if "$CTL" status >/dev/null 2>&1; then
  echo "quickstart: a kerncapd is already running; using it"
else
  LOG="${TMPDIR:-/tmp}/kerncapd-$(id -u).log"
  nohup "$BIN/kerncapd" >"$LOG" 2>&1 &
  echo "quickstart: started kerncapd (pid $!), log: $LOG"
  for _ in $(seq 1 100); do
    "$CTL" status >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

echo; echo "== kerncapctl status"; "$CTL" status
echo; echo "== kerncapctl arm --kernel=matmul --count=1"
"$CTL" arm --kernel=matmul --count=1
echo; echo "== a synthetic application launches 'matmul_bf16' 3 times (no GPU needed)"
"$BIN/synthetic_agent" --kernels=matmul_bf16,softmax --dispatches=3 --region-mib=8,32,4 --mutate
echo; echo "== kerncapctl captures"; "$CTL" captures
CAP="$("$CTL" captures --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["captures"][0]["capture_id"])')"
echo; echo "== kerncapctl show $CAP"; "$CTL" show "$CAP"
echo; echo "== kerncapctl verify $CAP"; "$CTL" verify "$CAP"
echo
echo "quickstart: done. kerncapd is still running; stop it with: pkill -TERM kerncapd"
