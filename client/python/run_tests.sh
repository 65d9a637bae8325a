#!/usr/bin/env bash
# ctest entry point of the Python client's tests (client/python/tests).
#
#   run_tests.sh BUILD_SUBDIR        (ctest passes ${CMAKE_CURRENT_BINARY_DIR})
#
# The package is installed into virtual environments under BUILD_SUBDIR (never
# into the system, never into the source tree: it is built from a staged copy
# laid out like an sdist, with the .proto files beside setup.py) and pytest
# runs against each of them:
#
#   debian  /usr/bin/python3 with Debian 12's python3-grpcio (1.51) and
#           python3-protobuf (3.21), through --system-site-packages, built
#           offline (--no-index) with the system's setuptools and protoc.
#           Runs when those packages are installed (deploy/install_deps.sh).
#   pypi    $KERNCAP_PYTHON (default python3) with current PyPI releases of
#           everything in the package's [test] extra. Runs when the package
#           index is reachable; the environment is reused while pyproject.toml
#           is unchanged, and only kerncap itself is reinstalled.
#
# KERNCAP_PY_COMBOS="debian pypi" (the default) picks which run. A combination
# that cannot be set up here is skipped with the reason; when none can run the
# script exits 77, which ctest reports as skipped (SKIP_RETURN_CODE). A test
# failure in any combination fails the test.
set -uo pipefail

SRC="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$SRC/../.." && pwd)"
OUT="${1:?usage: run_tests.sh BUILD_SUBDIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
COMBOS="${KERNCAP_PY_COMBOS:-debian pypi}"
SKIP=77
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export KERNCAP_BUILD_DIR="${KERNCAP_BUILD_DIR:-$REPO/build}"

log() { echo "python_client_test: $*"; }

# A copy of the package with the protos bundled, as in an sdist.
stage() {
  local stage="$OUT/stage"
  rm -rf "$stage" && mkdir -p "$stage/proto" || return 1
  cp -r "$SRC/pyproject.toml" "$SRC/setup.py" "$SRC/MANIFEST.in" "$SRC/README.md" "$SRC/src" \
    "$stage/" || return 1
  cp -r "$REPO/proto/kerncap" "$stage/proto/" || return 1
  find "$stage/src" -name '*.binpb' -delete
  echo "$stage"
}

run_pytest() {  # VENV_PYTHON LABEL
  log "[$2] $("$1" -c 'import grpc, google.protobuf as p, sys; print(f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, protobuf {p.__version__}")')"
  (cd "$SRC/tests" && "$1" -m pytest -q -p no:cacheprovider -rs --durations=5 "$SRC/tests")
}

ran=0
failed=0
skipped=()

combo_debian() {
  local py=/usr/bin/python3 venv="$OUT/venv-debian"
  [ -x "$py" ] || { skipped+=("debian: no /usr/bin/python3"); return 0; }
  if ! "$py" -c 'import grpc, google.protobuf, xxhash, pytest, setuptools' 2>/dev/null; then
    skipped+=("debian: Debian's python3-grpcio python3-protobuf python3-xxhash python3-pytest are not all installed (deploy/install_deps.sh installs them)")
    return 0
  fi
  if ! command -v protoc >/dev/null; then
    skipped+=("debian: no protoc (protobuf-compiler) to build the descriptors offline")
    return 0
  fi
  if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv --system-site-packages "$venv" >"$OUT/venv-debian.log" 2>&1 || {
      skipped+=("debian: $py -m venv failed (apt-get install python3-venv): $(tail -1 "$OUT/venv-debian.log")")
      rm -rf "$venv"; return 0; }
  fi
  local stage
  stage="$(stage)" || { log "cannot stage the package"; failed=1; return 0; }
  if ! "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation --no-index \
      --force-reinstall "$stage" >"$OUT/pip-debian.log" 2>&1; then
    log "[debian] installing the package failed:"; tail -20 "$OUT/pip-debian.log"
    failed=1; return 0
  fi
  ran=1
  run_pytest "$venv/bin/python" debian || failed=1
}

combo_pypi() {
  local py="${KERNCAP_PYTHON:-python3}" venv="$OUT/venv-pypi"
  command -v "$py" >/dev/null || { skipped+=("pypi: no $py"); return 0; }
  local stamp_want
  stamp_want="$("$py" -c 'import sys; print(sys.version)' | cksum)-$(cksum <"$SRC/pyproject.toml")"
  if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >"$OUT/venv-pypi.log" 2>&1 || {
      skipped+=("pypi: $py -m venv failed (Debian: apt-get install python3-venv): $(tail -1 "$OUT/venv-pypi.log")")
      rm -rf "$venv"; return 0; }
  fi
  local stage
  stage="$(stage)" || { log "cannot stage the package"; failed=1; return 0; }
  if [ "$(cat "$venv/.kerncap-stamp" 2>/dev/null)" = "$stamp_want" ] &&
     "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation --force-reinstall \
       "$stage" >"$OUT/pip-pypi.log" 2>&1; then
    :  # dependencies already there: only kerncap was reinstalled
  else
    # Is the package index reachable at all (honours pip's configured index)?
    if ! timeout 60 "$venv/bin/python" -m pip download -q --no-deps --retries 1 --timeout 10 \
        -d "$OUT/probe" xxhash >"$OUT/pip-probe.log" 2>&1; then
      skipped+=("pypi: the package index is unreachable ($(grep -iE 'error' "$OUT/pip-probe.log" | tail -1 | cut -c1-200))")
      return 0
    fi
    rm -rf "$OUT/probe"
    if ! "$venv/bin/python" -m pip install -q --retries 2 --timeout 30 --upgrade pip setuptools \
         >"$OUT/pip-pypi.log" 2>&1 ||
       ! "$venv/bin/python" -m pip install -q --retries 2 --timeout 30 --upgrade \
         "$stage[test]" >>"$OUT/pip-pypi.log" 2>&1; then
      log "[pypi] installing the package and its test dependencies failed:"
      tail -20 "$OUT/pip-pypi.log"
      failed=1; return 0
    fi
    echo "$stamp_want" >"$venv/.kerncap-stamp"
  fi
  ran=1
  run_pytest "$venv/bin/python" pypi || failed=1
}

for combo in $COMBOS; do
  case "$combo" in
    debian) combo_debian ;;
    pypi) combo_pypi ;;
    *) log "unknown combination '$combo' in KERNCAP_PY_COMBOS"; exit 2 ;;
  esac
done

for s in "${skipped[@]+"${skipped[@]}"}"; do log "SKIPPED $s"; done
if [ "$failed" -ne 0 ]; then log "FAILED"; exit 1; fi
if [ "$ran" -eq 0 ]; then log "SKIPPED: no Python environment could be set up (see above)"; exit $SKIP; fi
log "passed"
exit 0
