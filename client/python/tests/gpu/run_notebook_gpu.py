#!/usr/bin/env python3
"""Runs examples/kerncap_quickstart.ipynb headless (nbclient) against a LIVE
capture on a GPU machine: a real kerncapd, a real CUDA application
(gpu_tests/vector_add) with the real agent (libkerncap_agent.so through
CUDA_INJECTION64_PATH), and validate/bench through the real kerncap-replay.
The CPU counterpart is tests/test_notebook.py (the synthetic agent stands in
for the application there).

    run_notebook_gpu.py [--build DIR] LOGS

DIR holds bin/{kerncapd,kerncap-replay}, lib/libkerncap_agent.so and
gpu_tests/vector_add: the GPU bundle (deploy/gpu/bundle.sh), whose
run_gpu_tests.sh runs this script as `notebook_gpu_test`; default
$KERNCAP_BUILD_DIR, else the bundle this script lies in
(.bundle/python_client/tests/gpu/). The kerncap package is imported as
installed, else from the bundle's python_client/src (bundle.sh puts the
compiled protocol descriptors there).

The GPU machine lacks nbclient, nbformat, ipykernel and jupyter_client: they
travel as wheels in .whl/ (the device tool's carry), which
fetch_notebook_wheels.sh (next to this script) downloads here. On the device:

    tar xzf .bundle-carry/bundle.tgz && python3 -m pip install -q --no-index --no-deps \
      --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && \
      PYTHONPATH=/tmp/site KERNCAP_GPU_ONLY=notebook_gpu_test bash .bundle/run_gpu_tests.sh "$OUT"

(device tool carry: [".bundle-carry", ".whl"]). Writes to LOGS:
kerncap_quickstart.ipynb (executed, with its outputs) and notebook_gpu.log
(this script's log plus kerncapd's). Checks: no error outputs, the capture's
kernel is vector_add, validate shows PASS, bench shows a median time, the
memory map plot exists.

Exit status: 0 passed, 1 failed, 77 skipped (no GPU, or a Python package
missing: the reason is printed).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

SKIP = 77
HERE = Path(__file__).resolve().parent
CLIENT = HERE.parents[1]            # client/python, or .bundle/python_client
NOTEBOOK = CLIENT / "examples" / "kerncap_quickstart.ipynb"
KERNEL = "vector_add"


class Log:
    """Prints to stdout and to LOGS/notebook_gpu.log."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "w")

    def __call__(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def default_build() -> Path:
    env = os.environ.get("KERNCAP_BUILD_DIR")
    if env:
        return Path(env)
    bundle = HERE.parents[2]  # .bundle/python_client/tests/gpu -> .bundle
    if (bundle / "bin" / "kerncapd").is_file():
        return bundle
    return HERE.parents[3] / "build"  # client/python/tests/gpu -> repository


def import_packages(log: Log) -> Optional[str]:
    """Imports what the run needs; returns a reason when something is
    missing. Puts the bundle's kerncap sources on sys.path (and PYTHONPATH,
    for the notebook's kernel) when kerncap is not installed."""
    missing = []
    for name in ("nbformat", "nbclient", "ipykernel", "jupyter_client", "zmq", "grpc",
                 "google.protobuf", "xxhash", "pandas", "matplotlib"):
        try:
            __import__(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    try:
        import kerncap  # noqa: F401
    except ImportError:
        src = CLIENT / "src"
        if (src / "kerncap" / "__init__.py").is_file():
            sys.path.insert(0, str(src))
            os.environ["PYTHONPATH"] = os.pathsep.join(
                [str(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        try:
            import kerncap  # noqa: F401,F811
        except ImportError as e:
            missing.append(f"kerncap ({e})")
    if missing:
        return ("missing Python packages: " + "; ".join(missing) + ". They travel as wheels "
                "(.whl/, installed with pip --target /tmp/site and PYTHONPATH=/tmp/site: see "
                "this script's header)")
    import grpc
    import google.protobuf
    import ipykernel
    import kerncap
    import nbclient
    log(f"python {sys.version.split()[0]} ({sys.executable}); grpcio {grpc.__version__}, "
        f"protobuf {google.protobuf.__version__}, nbclient {nbclient.__version__}, "
        f"ipykernel {ipykernel.__version__}; kerncap from {Path(kerncap.__file__).parent}")
    return None


def no_gpu_reason() -> Optional[str]:
    """None when the CUDA driver sees a device, else why not."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no CUDA driver (libcuda.so.1: {e})"
    rc = cuda.cuInit(0)
    if rc != 0:
        return f"cuInit failed (CUresult {rc})"
    n = ctypes.c_int(0)
    rc = cuda.cuDeviceGetCount(ctypes.byref(n))
    if rc != 0:
        return f"cuDeviceGetCount failed (CUresult {rc})"
    return None if n.value > 0 else "0 CUDA devices"


def kernel_spec(root: Path) -> str:
    """A kernel spec for this very interpreter (the machine's "python3" spec,
    if any, may name another Python)."""
    spec_dir = root / "jupyter" / "kernels" / "kerncap-gpu"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "kerncap GPU test", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(root / "jupyter")
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(root / "jupyter-runtime")
    os.environ["IPYTHONDIR"] = str(root / "ipython")
    os.environ["MPLCONFIGDIR"] = str(root / "mpl")
    return "kerncap-gpu"


def smoke_kernel(kernel_name: str, cwd: Path, log: Log) -> None:
    """Starts the notebook kernel once: it must import kerncap."""
    import nbclient
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, kerncap\nprint(sys.executable, kerncap.__file__)"))
    nbclient.NotebookClient(nb, timeout=120, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(cwd)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    log("kernel started:", text.strip())


def library_path(build: Path) -> None:
    """bin/ and the agent need the bundle's libraries (run_gpu_tests.sh sets
    this already; standalone runs get the same: the machine's CUPTI first)."""
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    if str(build / "lib") in current:
        return
    add = [str(build / "lib")]
    import glob
    for pattern in ("/usr/local/cuda*/extras/CUPTI/lib64", "/usr/local/cuda*/lib64",
                    "/usr/local/cuda*/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"):
        hits = [d for d in sorted(glob.glob(pattern)) if Path(d, "libcupti.so.13").exists()]
        if hits:
            add.append(hits[0])
            break
    else:
        add.append(str(build / "lib" / "cupti"))
    os.environ["LD_LIBRARY_PATH"] = ":".join(add + current)


def start_kerncapd(build: Path, tmp: Path, log_path: Path, log: Log) -> subprocess.Popen:
    sock = tmp / "ctl.sock"
    proc = subprocess.Popen(
        [str(build / "bin" / "kerncapd"), f"--store={tmp / 'store'}", f"--socket={sock}",
         f"--agent-socket={tmp / 'agent.sock'}", "--log-level=debug"],
        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"kerncapd did not start (exit {proc.poll()}):\n"
                               + log_path.read_text(errors="replace")[-3000:])
        time.sleep(0.05)
    log(f"kerncapd pid {proc.pid}: socket {sock}, agent socket {tmp / 'agent.sock'}")
    return proc


def outputs_of(nb) -> List[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def check(nb, work: Path, log: Log) -> List[str]:
    """The notebook's results; returns the failures."""
    import kerncap
    failures = []
    outs = outputs_of(nb)
    errors = [o for o in outs if o.get("output_type") == "error"]
    for e in errors:
        failures.append(f"error output: {e.get('ename')}: {e.get('evalue')}")
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs)
    text = "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream")
    text += "".join(o.get("data", {}).get("text/plain", "") for o in outs)
    for needle in ("kerncapd status", "memory map", "kerncap-replay validate",
                   "kerncap-replay bench"):
        if needle not in html:
            failures.append(f"no {needle!r} table in the outputs")
    for bad in ("no replay here:", "replay failed:"):
        if bad in text:
            line = next(l for l in text.splitlines() if bad in l)
            failures.append(f"the notebook printed {line.strip()!r}")
    verdict = re.search(r"(PASS|FAIL): (\d+) regions compared, (\d+) differ", html)
    if verdict is None:
        failures.append("no validate verdict in the outputs")
    elif verdict.group(1) != "PASS":
        failures.append(f"validate: {verdict.group(0)}")
    else:
        log(f"[ pass ] notebook_gpu: validate {verdict.group(0)}")
    median = re.search(r"median\s+([0-9.]+) ms", re.sub(r"<[^>]+>", " ", html))
    if median is None or float(median.group(1)) <= 0:
        failures.append("bench: no median time in the outputs")
    else:
        log(f"[ bench ] notebook_gpu: median {median.group(1)} ms")
    if not any("image/png" in o.get("data", {}) for o in outs):
        failures.append("no memory map plot (image/png output)")
    kcap = work / f"{KERNEL}.kcap"
    if not kcap.is_file():
        failures.append(f"the notebook exported no {kcap.name}")
    else:
        cap = kerncap.Capture.from_kcap(kcap)
        log(f"capture {cap.id}: kernel {cap.kernel.name!r} ({cap.kernel.mangled_name}, "
            f"{cap.kernel.arch}), {len(cap.regions)} regions, tags {cap.tags}")
        if not re.match(rf"{KERNEL}\b", cap.kernel.name):
            failures.append(f"captured kernel {cap.kernel.name!r}, not {KERNEL}")
        if cap.tags != {"notebook": "quickstart"}:
            failures.append(f"capture tags {cap.tags}")
        chunks, raw = kerncap.kcap.verify(kcap)  # raises on a damaged file
        log(f"{kcap.name}: {chunks} chunks, {raw} bytes verified")
        if chunks <= 0:
            failures.append(f"{kcap.name} holds no memory chunks")
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", type=Path)
    ap.add_argument("--build", type=Path, default=None)
    ap.add_argument("--notebook", type=Path, default=NOTEBOOK)
    ap.add_argument("--cell-timeout", type=int, default=180)
    args = ap.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    log = Log(args.logs / "notebook_gpu.log")
    build = (args.build or default_build()).resolve()
    log(f"build/bundle: {build}; notebook: {args.notebook}")

    reason = import_packages(log)
    if reason:
        log(f"[ SKIPPED ] notebook_gpu: {reason}")
        return SKIP
    # A timeout(1) SIGTERM still stops kerncapd and keeps the logs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    tmp = Path(tempfile.mkdtemp(prefix="kcnb-", dir="/tmp"))  # short: Unix socket paths
    work = tmp / "work"
    work.mkdir()
    daemon = None
    daemon_log = tmp / "kerncapd.log"
    try:
        kernel_name = kernel_spec(tmp)
        smoke_kernel(kernel_name, work, log)
        reason = no_gpu_reason()
        if reason:
            log(f"[ SKIPPED ] notebook_gpu: no GPU: {reason}")
            return SKIP
        need = {"kerncapd": build / "bin" / "kerncapd",
                "kerncap-replay": build / "bin" / "kerncap-replay",
                "agent": build / "lib" / "libkerncap_agent.so",
                "application": build / "gpu_tests" / KERNEL}
        absent = [f"{k} ({p})" for k, p in need.items() if not p.is_file()]
        if absent:
            log(f"[ FAILED ] notebook_gpu: missing {', '.join(absent)}")
            return 1
        library_path(build)
        log(f"LD_LIBRARY_PATH={os.environ['LD_LIBRARY_PATH']}")
        daemon = start_kerncapd(build, tmp, daemon_log, log)

        # What the notebook's kernel inherits. The agent goes into the
        # application's environment only (`env ...` in KERNCAP_DEMO_APP): in
        # the kernel's own, kerncap-replay would load it too.
        os.environ.pop("KERNCAP_DEMO_AGENT", None)
        os.environ.pop("CUDA_INJECTION64_PATH", None)
        os.environ["KERNCAP_SOCKET"] = str(tmp / "ctl.sock")
        os.environ["KERNCAP_REPLAY"] = str(need["kerncap-replay"])
        os.environ["KERNCAP_DEMO_KERNEL"] = KERNEL
        os.environ["KERNCAP_DEMO_APP"] = shlex.join([
            "env", f"CUDA_INJECTION64_PATH={need['agent']}",
            f"KERNCAP_AGENT_SOCKET={tmp / 'agent.sock'}", "KERNCAP_AGENT_LOG=debug",
            str(need["application"])])
        os.environ["PYTHONUNBUFFERED"] = "1"
        log(f"KERNCAP_DEMO_APP={os.environ['KERNCAP_DEMO_APP']}")

        import nbclient
        import nbformat
        nb = nbformat.read(str(args.notebook), as_version=4)
        client = nbclient.NotebookClient(nb, timeout=args.cell_timeout, kernel_name=kernel_name,
                                         resources={"metadata": {"path": str(work)}})
        started = time.monotonic()
        failures = []
        try:
            client.execute()
        except Exception as e:  # CellExecutionError, timeouts, a dead kernel
            failures.append(f"execution stopped: {type(e).__name__}: {str(e)[-2000:]}")
        log(f"notebook executed in {time.monotonic() - started:.1f} s")
        nbformat.write(nb, str(args.logs / "kerncap_quickstart.ipynb"))
        for o in outputs_of(nb):
            if o.get("output_type") == "stream":
                for line in o.get("text", "").splitlines():
                    log(f"  notebook {o.get('name')}: {line}")
        try:
            failures += check(nb, work, log)
        except Exception as e:
            failures.append(f"checking the results raised {type(e).__name__}: {e}")
        for f in failures:
            log(f"[ FAILED ] notebook_gpu: {f}")
        if not failures:
            log("[ PASSED ] notebook_gpu: the quickstart notebook ran against a live capture")
        return 1 if failures else 0
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if daemon_log.exists():
            log("---- kerncapd log (last 20000 characters)")
            log(daemon_log.read_text(errors="replace")[-20000:])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
