#!/usr/bin/env bash
# One-command start on a fresh Debian 12 machine: installs dependencies,
# builds, starts a local kerncapd on its embedded defaults (store under
# $XDG_DATA_HOME or ~/.local/share, Unix socket under $XDG_RUNTIME_DIR or
# /tmp/kerncap-$UID, /run/kerncap and /var/lib/kerncap as root), then shows it
# working: a synthetic application is armed, captured, listed, shown and
# verified. kerncapd keeps running afterwards.
#
# The build is the quick one: no tests, no benchmarks (KERNCAP_QUICK=1 of
# deploy/build.sh), and only the three programs the demo runs (kerncapd,
# kerncapctl, synthetic_agent: KERNCAP_TARGETS), about half of the quick
# configuration's steps (9m14s on a 2-core VM without ccache, README); the slicer's static clang link, kerncap-replay, the
# agents and the HSA parts are left for the full build. `bash deploy/build.sh`
# builds the rest into the same folder; `bash tests/run_tests.sh` builds
# everything with the tests and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install_deps.sh
KERNCAP_QUICK="${KERNCAP_QUICK:-1}" \
  KERNCAP_TARGETS="${KERNCAP_TARGETS-kerncapd kerncapctl synthetic_agent}" bash deploy/build.sh
BIN="$(pwd)/${KERNCAP_BUILD_DIR:-build}/bin"
CTL="$BIN/kerncapctl"

if "$CTL" status >/dev/null 2>&1; then
  echo "quickstart: a kerncapd is already running; using it"
else
  LOG="${TMPDIR:-/tmp}/kerncapd-$(id -u).log"
  nohup "$BIN/kerncapd" >"$LOG" 2>&1 &
  KERNCAPD_PID=$!
  echo "quickstart: started kerncapd (pid $KERNCAPD_PID), log: $LOG"
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
CAP="$("$CTL" captures -q | head -1)"  # ids only, newest first
echo; echo "== kerncapctl show $CAP"; "$CTL" show "$CAP"
echo; echo "== kerncapctl verify $CAP"; "$CTL" verify "$CAP"
echo
if [ -n "${KERNCAPD_PID:-}" ]; then
  # Stops this one daemon (pkill would stop every kerncapd on the host).
  echo "quickstart: done. kerncapd is still running; stop it with: kill $KERNCAPD_PID"
else
  echo "quickstart: done (the kerncapd that was already running keeps running)"
fi
