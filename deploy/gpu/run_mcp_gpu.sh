#!/usr/bin/env bash
# run_mcp_gpu.sh: kerncap's MCP server end to end on the GPU machine
# (deploy/gpu/mcp_e2e.py: an MCP client drives `python -m kerncap.mcp_server`
# against kerncapd and substitute_app under the agent, through every tool,
# live substitution with A/B included). Run from the repository's copy on the
# GPU machine, after unpacking the bundle (deploy/gpu/bundle.sh):
#
#   tar xzf .bundle-carry/bundle.tgz && bash deploy/gpu/run_mcp_gpu.sh "$OUT"
#
# (device tool carry: [".bundle-carry", ".mcp-wheels"]). The machine has no
# network and no `mcp` package: when `import mcp` fails it is installed from
# the wheels deploy/gpu/fetch_mcp_wheels.sh downloaded into .mcp-wheels/
# (pip --no-index --target a temporary folder, put on PYTHONPATH). The kerncap
# package is the bundle's python_client/src (its protocol descriptors are
# compiled there: the machine has no protoc).
#
# Logs go to $1, else $OUT, else ./mcp-gpu-logs: mcp_e2e.json (every step's
# structured result), kerncapd.log, app.log, run_mcp_gpu.log. Exit status: 0
# when every step passed, else 1 (mcp_e2e.json's "failed" names the steps).
# Environment: KERNCAP_BUNDLE (default .bundle), KERNCAP_MCP_WHEELS (default
# .mcp-wheels), KERNCAP_PYTHON (default python3), KC_T_MCP (time limit, s; 540).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=$(cd "${KERNCAP_BUNDLE:-$ROOT/.bundle}" 2>/dev/null && pwd) || BUNDLE=""
LOGS=${1:-${OUT:-$PWD/mcp-gpu-logs}}
WHEELS=${KERNCAP_MCP_WHEELS:-$ROOT/.mcp-wheels}
PY=${KERNCAP_PYTHON:-python3}
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
exec > >(tee "$LOGS/run_mcp_gpu.log") 2>&1

if [[ -z $BUNDLE || ! -x $BUNDLE/bin/kerncapd ]]; then
  echo "run_mcp_gpu: no GPU bundle at ${KERNCAP_BUNDLE:-$ROOT/.bundle} (tar xzf .bundle-carry/bundle.tgz first)"
  exit 1
fi
echo "run_mcp_gpu: bundle $BUNDLE, logs $LOGS, python $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

# Libraries as run_gpu_tests.sh sets them: the bundle's, and the machine's
# CUPTI (it matches its driver) before the bundled fallback.
LIBS=$BUNDLE/lib
CUPTI=$BUNDLE/lib/cupti
for d in /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda*/lib64 \
         /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  if [[ -e $d/libcupti.so.13 ]]; then CUPTI=$d; break; fi
done
export LD_LIBRARY_PATH=$LIBS:$CUPTI${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "run_mcp_gpu: CUPTI from $CUPTI"
# nvcc and make for evaluate_candidate's `make recompile`.
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [[ -x $d/nvcc ]] && { PATH=$PATH:$d; break; }; done
export PATH
echo "run_mcp_gpu: nvcc $(command -v nvcc || echo 'not found (the reproducer build will fail)')"

export PYTHONPATH=$BUNDLE/python_client/src${PYTHONPATH:+:$PYTHONPATH}
SITE=""
if ! "$PY" -c 'import mcp' 2>/dev/null; then
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "run_mcp_gpu: no mcp package here and no wheels in $WHEELS (run deploy/gpu/fetch_mcp_wheels.sh where PyPI is reachable, and carry .mcp-wheels)"
    exit 1
  fi
  SITE=$(mktemp -d /tmp/kc-mcp-site.XXXXXX)
  if ! "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-compile --no-cache-dir \
       --disable-pip-version-check --target "$SITE" mcp; then
    echo "run_mcp_gpu: installing mcp from $WHEELS failed"
    exit 1
  fi
  export PYTHONPATH=$SITE:$PYTHONPATH
fi
"$PY" -c 'import mcp, kerncap, grpc; from importlib.metadata import version; print("run_mcp_gpu: mcp", version("mcp"), "from", mcp.__path__[0], "; kerncap from", kerncap.__path__[0], "; grpcio", grpc.__version__)' || {
  echo "run_mcp_gpu: the MCP client or the kerncap package does not import"; exit 1; }

timeout "${KC_T_MCP:-540}" "$PY" "$ROOT/deploy/gpu/mcp_e2e.py" --bundle "$BUNDLE" "$LOGS"
rc=$?
[[ -n $SITE ]] && rm -rf "$SITE"
echo "run_mcp_gpu: exit $rc"
exit $rc
