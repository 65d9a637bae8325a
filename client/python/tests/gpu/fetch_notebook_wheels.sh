#!/usr/bin/env bash
# fetch_notebook_wheels.sh: downloads (here, where PyPI is reachable) the
# wheels run_notebook_gpu.py needs on the GPU machine, which has Python 3.12
# with grpcio, protobuf, pandas, matplotlib, pygments, attrs, packaging and
# python-dateutil but no Jupyter stack and no network. These are the versions
# the live-capture run on the H200 used (11 MiB together).
#
# Usage: client/python/tests/gpu/fetch_notebook_wheels.sh [DIR]   (default .whl,
# which .gitignore keeps out of the repository; the device tool carries it)
set -euo pipefail
DIR=${1:-.whl}
PINS=(asttokens==3.0.2 comm==0.2.3 debugpy==1.8.22 executing==2.3.0 fastjsonschema==2.22.3
      ipykernel==7.4.0 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.19.2
      jsonschema==4.26.0 jsonschema_specifications==2025.9.1 jupyter_client==8.10.0
      jupyter_core==5.9.1 matplotlib_inline==0.2.2 nbclient==0.11.0 nbformat==5.11.1
      nest_asyncio2==1.7.4 parso==0.8.7 pexpect==4.9.0 platformdirs==4.14.8
      prompt_toolkit==3.0.53 psutil==7.2.2 ptyprocess==0.7.0 pure_eval==0.2.4 pyzmq==27.3.0
      referencing==0.37.0 rpds_py==2026.9.1 stack_data==0.6.3 tornado==6.6.1 traitlets==5.16.1
      typing_extensions==4.16.0 wcwidth==0.9.4)
mkdir -p "$DIR"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DIR" "${PINS[@]}"
echo "fetch_notebook_wheels: $(ls "$DIR"/*.whl | wc -l) wheels in $DIR ($(du -sh "$DIR" | cut -f1))"
