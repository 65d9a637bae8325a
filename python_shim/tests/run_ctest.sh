#!/usr/bin/env bash
# run_ctest.sh BUILD_DIR
#
# python_shim's pytest suite as one ctest test: creates a venv in
# BUILD_DIR/python_shim_venv (kept between runs, never in the source tree),
# pip-installs test dependencies (pytest, triton) and the package itself,
# and runs pytest. KERNCAP_AGENT_LIB / KERNCAP_AGENT_HSA_LIB (set by CMake
# to the built agents) are loaded by the hand-off tests when they exist.
#
# Exit 77 (ctest SKIP_RETURN_CODE) when the suite cannot run here: no
# python3 with venv support, or PyPI unreachable while the venv lacks the
# dependencies. Environment: KERNCAP_SHIM_PYTHON (default python3),
# KERNCAP_SHIM_TRITON (pip requirement, default triton==3.6.0, the GPU
# machine's version), PIP_INDEX_URL etc. as pip understands them.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHIM=$(dirname "$HERE")
BUILD=${1:?usage: run_ctest.sh BUILD_DIR}
mkdir -p "$BUILD" || exit 1
BUILD=$(cd "$BUILD" && pwd)
VENV=$BUILD/python_shim_venv
PY=${KERNCAP_SHIM_PYTHON:-python3}
TRITON_REQ=${KERNCAP_SHIM_TRITON:-triton==3.6.0}
SKIP=77

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "SKIP: no $PY"
  exit $SKIP
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "SKIP: $PY cannot create virtual environments (Debian: apt-get install python3-venv)"
  exit $SKIP
fi
if [[ ! -x $VENV/bin/python ]]; then
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" >/dev/null; then
    echo "SKIP: $PY -m venv $VENV failed"
    exit $SKIP
  fi
fi
VPY=$VENV/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

pypi_reachable() {
  "$VPY" - <<'PYEOF'
import os, sys, urllib.request
url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/") + "/pytest/"
try:
    urllib.request.urlopen(url, timeout=15).read(64)
except Exception as e:
    print("PyPI (%s) unreachable: %s" % (url, e))
    sys.exit(1)
PYEOF
}

# Test dependencies: installed once, reused by later runs (again when the
# requested triton changes).
STAMP=$VENV/.kerncap_triton_requirement
if ! "$VPY" -c 'import pytest' >/dev/null 2>&1 || ! "$VPY" -m pip show triton >/dev/null 2>&1 \
    || [[ "$(cat "$STAMP" 2>/dev/null)" != "$TRITON_REQ" ]]; then
  if ! "$VPY" -m pip install --quiet "pytest>=7" "$TRITON_REQ"; then
    if ! pypi_reachable; then
      echo "SKIP: cannot install pytest and $TRITON_REQ: PyPI unreachable"
      exit $SKIP
    fi
    # pytest alone still runs every test that does not need triton; those
    # that do skip and say why.
    if ! "$VPY" -m pip install --quiet "pytest>=7"; then
      echo "FAIL: pip install pytest failed although PyPI is reachable"
      exit 1
    fi
    echo "note: $TRITON_REQ could not be installed; Triton tests will skip"
  else
    echo "$TRITON_REQ" > "$STAMP"
  fi
fi

# The package itself, always afresh (the sources change). Building the
# wheel needs hatchling (pip fetches it); offline, fall back to the source
# tree on PYTHONPATH (the .pth activation tests then skip).
if ! "$VPY" -m pip install --quiet --no-deps --force-reinstall "$SHIM" >"$BUILD/python_shim_pip.log" 2>&1; then
  if pypi_reachable >/dev/null; then
    echo "FAIL: pip install $SHIM failed:"; cat "$BUILD/python_shim_pip.log"
    exit 1
  fi
  echo "note: package not installed (PyPI unreachable for its build backend); testing the source tree"
  "$VPY" -m pip uninstall --quiet --yes kerncap-triton-shim >/dev/null 2>&1
  export PYTHONPATH=$SHIM/src${PYTHONPATH:+:$PYTHONPATH}
fi

export TMPDIR=${TMPDIR:-/tmp}
cd "$BUILD" || exit 1
"$VPY" -c 'import triton; print("triton", triton.__version__)' 2>/dev/null || echo "triton: not installed"
# -p no:cacheprovider: nothing written into the source tree.
exec "$VPY" -m pytest -q -rs -p no:cacheprovider --rootdir "$SHIM" -c "$SHIM/pyproject.toml" "$HERE"
