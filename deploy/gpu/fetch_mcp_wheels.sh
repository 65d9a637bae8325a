#!/usr/bin/env bash
# fetch_mcp_wheels.sh: downloads (here, where PyPI is reachable) the `mcp`
# package and its dependencies as wheels for the GPU machine (CPython 3.12,
# manylinux x86_64, no network), where run_mcp_gpu.sh installs them with
# pip --no-index when `import mcp` fails.
#
# Usage: deploy/gpu/fetch_mcp_wheels.sh [DIR]   (default .mcp-wheels, which
# .gitignore keeps out of the repository; the device tool carries it)
# MCP_SPEC picks the version (default: mcp>=1.2,<3, as kerncap[mcp] allows);
# MCP_PYTHON the CPython version (default 3.12, the GPU machine's; another one
# tests run_mcp_gpu.sh's install path with this machine's Python).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${1:-$ROOT/.mcp-wheels}
mkdir -p "$DIR"
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
  --python-version "${MCP_PYTHON:-3.12}" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$DIR" "${MCP_SPEC:-mcp>=1.2,<3}"
size_kib=$(du -sk "$DIR" | cut -f1)
echo "fetch_mcp_wheels: $(ls "$DIR"/*.whl | wc -l) wheels in $DIR (${size_kib} KiB)"
if (( size_kib >= 30 * 1024 )); then
  echo "fetch_mcp_wheels: error: ${size_kib} KiB; keep the carry well under 30 MiB" >&2
  exit 1
fi
