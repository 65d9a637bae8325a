#!/usr/bin/env bash
# validate_manifests.sh: deploy/kubernetes/*.yaml against the Kubernetes API
# schema, with kubernetes-validate from PyPI (it ships the official JSON
# schemas of each Kubernetes release) in a virtual environment under
# BUILD_SUBDIR. Strict: unknown fields are errors. A copy with a wrong field
# type must fail, so a validator that passes everything fails this test.
#
#   validate_manifests.sh BUILD_SUBDIR     exit 0 pass, 1 fail, 77 skipped
#
# This checks the manifests' shape only: they have not run on a cluster.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${1:?usage: validate_manifests.sh BUILD_SUBDIR}"
mkdir -p "$OUT"
VENV="$OUT/kubernetes-validate-venv"
KV="$VENV/bin/kubernetes-validate"
if [ ! -x "$KV" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { echo "SKIPPED: python3 -m venv failed"; exit 77; }
  if ! "$VENV/bin/pip" install -q kubernetes-validate >"$OUT/pip.log" 2>&1; then
    echo "SKIPPED: cannot install kubernetes-validate from PyPI (see $OUT/pip.log)"
    rm -rf "$VENV"
    exit 77
  fi
fi
fail=0
# The oldest Kubernetes still commonly run, and the validator's newest.
for v in 1.28 ""; do
  for m in "$REPO"/deploy/kubernetes/*.yaml; do
    if "$KV" --strict --quiet ${v:+-k "$v"} "$m"; then
      echo "ok: $(basename "$m") ${v:-(newest)}"
    else
      echo "FAIL: $(basename "$m") ${v:-(newest)}"
      fail=1
    fi
  done
done
# The negative control: a port given as a string.
bad="$OUT/daemonset-bad.yaml"
sed 's/containerPort: 7443/containerPort: "seventy"/' "$REPO/deploy/kubernetes/kerncapd-daemonset.yaml" >"$bad"
if "$KV" --strict --quiet "$bad" >/dev/null 2>&1; then
  echo "FAIL: a manifest with containerPort \"seventy\" passed validation"
  fail=1
else
  echo "ok: a wrong field type is rejected"
fi
[ "$fail" -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$fail"
