"""Fixtures: a real kerncapd on a temporary store and sockets, and the
synthetic agent (agent/testing/synthetic_agent: the real agent-link client
standing in for a GPU application) to produce captures.

Binaries come from $KERNCAP_BUILD_DIR/bin (set by the ctest wrapper), else
the repository's build/bin. Tests that need them skip, saying which binary is
missing, when they are not built.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

# kerncapctl's contexts file: none, unless a test writes one (a developer's own
# current context must not redirect the tests' connections).
os.environ["KERNCAP_CONFIG"] = os.path.join(tempfile.mkdtemp(prefix="kcpycfg-"), "config.toml")


def bin_dir() -> Path:
    env = os.environ.get("KERNCAP_BUILD_DIR")
    return Path(env) / "bin" if env else REPO / "build" / "bin"


def binary(name: str) -> Optional[str]:
    p = bin_dir() / name
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


def require(*names: str) -> Dict[str, str]:
    found = {n: binary(n) for n in names}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} in {bin_dir()} (build them: ninja -C build "
                    f"{' '.join(missing)}, or set KERNCAP_BUILD_DIR)")
    return found  # type: ignore[return-value]


def short_tmpdir(prefix: str) -> str:
    # Unix socket paths are limited to 107 bytes: pytest's tmp_path can be longer.
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


class Daemon:
    """One kerncapd process with its own store and sockets."""

    # A root kerncapd's TCP clients act as nobody, never as root (its
    # --tcp-user): the applications they capture from are then nobody's too.
    NOBODY = 65534

    def __init__(self, directory: str, extra_args: List[str] = ()) -> None:
        self.dir = directory
        tcp = any(a.startswith("--listen=") for a in extra_args)
        self.agent_prefix: List[str] = []
        if tcp and os.geteuid() == 0 and shutil.which("setpriv"):
            extra_args = [*extra_args, f"--tcp-user={self.NOBODY}",
                          f"--socket-group={self.NOBODY}"]
            os.chmod(directory, 0o755)
            self.agent_prefix = [shutil.which("setpriv"), f"--reuid={self.NOBODY}",
                                 f"--regid={self.NOBODY}", f"--groups={self.NOBODY}"]
        self.bins = require("kerncapd", "kerncapctl", "synthetic_agent")
        self.store = f"{directory}/store"
        self.socket = f"{directory}/kerncapd.sock"
        self.agent_socket = f"{directory}/agent.sock"
        self.log = open(f"{directory}/kerncapd.log", "wb")
        self.proc = subprocess.Popen(
            [self.bins["kerncapd"], f"--store={self.store}", f"--socket={self.socket}",
             f"--agent-socket={self.agent_socket}", "--chunk-size=64KiB", "--drain-timeout=2",
             "--workers=2", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kerncapd exited with {self.proc.returncode}:\n{self.logs()}")
            if os.path.exists(self.socket) and self.ctl("status").returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"kerncapd did not come up:\n{self.logs()}")
            time.sleep(0.05)

    def logs(self) -> str:
        self.log.flush()
        return Path(f"{self.dir}/kerncapd.log").read_text(errors="replace")[-4000:]

    def ctl(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        r = subprocess.run([self.bins["kerncapctl"], f"--socket={self.socket}", *args],
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"kerncapctl {' '.join(args)} failed ({r.returncode}): "
                                 f"{r.stderr}{r.stdout}")
        return r

    def agent_argv(self, kernels: str = "matmul_bf16", dispatches: int = 1,
                   region_mib: str = "1,0.25", seed: int = 7, mutate: bool = True,
                   wait_arm_ms: int = 5000, shapes: int = 0,
                   wait_sample_ms: int = 0) -> List[str]:
        argv = [*self.agent_prefix, self.bins["synthetic_agent"], f"--socket={self.agent_socket}",
                f"--kernels={kernels}", f"--dispatches={dispatches}",
                f"--region-mib={region_mib}", f"--seed={seed}", f"--wait-arm-ms={wait_arm_ms}"]
        if mutate:
            argv.append("--mutate")
        if shapes:
            argv.append(f"--shapes={shapes}")
        if wait_sample_ms:
            argv.append(f"--wait-sample-ms={wait_sample_ms}")
        return argv

    def run_agent(self, **kw) -> List[dict]:
        """Runs the synthetic agent to completion; returns its JSON lines
        (one per capture attempt)."""
        r = subprocess.run(self.agent_argv(**kw), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        for line in lines:
            assert "error" not in line, line
        return lines

    def start_agent(self, **kw) -> subprocess.Popen:
        return subprocess.Popen(self.agent_argv(**kw), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def daemon():
    d = Daemon(short_tmpdir("kcpy-"))
    try:
        yield d
    finally:
        d.stop()
        shutil.rmtree(d.dir, ignore_errors=True)


@pytest.fixture()
def client(daemon):
    import kerncap
    with kerncap.connect(daemon.socket) as c:
        yield c


@pytest.fixture(scope="session")
def captured(daemon):
    """Two captures of a mutating (in-place) kernel, taken once per session:
    {"arm": Arm, "ids": [capture ids]}."""
    import kerncap
    with kerncap.connect(daemon.socket) as c:
        arm = c.arm(kernel="matmul", count=2, tags={"suite": "python"})
        lines = daemon.run_agent(kernels="matmul_bf16,softmax", dispatches=4, region_mib="1,0.25")
        ids = [line["capture_id"] for line in lines]
        assert len(ids) == 2, lines
        return {"arm": arm, "ids": ids}


@pytest.fixture(scope="session")
def tls_daemon():
    """A kerncapd serving TCP with TLS (a self-signed localhost certificate) and a
    bearer token: .port, .cert, .token."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl binary to make a test certificate")
    d = short_tmpdir("kcpytls-")
    cert, key, token = f"{d}/cert.pem", f"{d}/key.pem", f"{d}/token"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    with open(token, "w") as f:
        f.write("python-client-token\n")
    port = free_port()
    daemon = Daemon(d, [f"--listen=127.0.0.1:{port}", f"--tls-cert={cert}", f"--tls-key={key}",
                        f"--token-file={token}"])
    daemon.port, daemon.cert, daemon.token = port, cert, token
    try:
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture()
def tmpdir_short():
    d = short_tmpdir("kcpyt-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_fake_replayer(directory: str, *, exit_code: int = 0, doc: Optional[dict] = None,
                        stderr: str = "") -> str:
    """A stand-in for kerncap-replay: records its argv (and, for a .kcap
    source, that the file existed) and prints `doc` (or a report shaped like
    reproducer/replay/report.cc's for the mode it is run with; "" prints
    nothing, as the replayer does on an error) and `stderr`."""
    path = Path(directory) / "fake-kerncap-replay"
    log = Path(directory) / "replay-argv.json"
    script = f"""#!{sys.executable}
import json, os, sys
argv = sys.argv[1:]
src = [a for a in argv[1:] if not a.startswith('--')][0]
json.dump({{"argv": argv, "src_exists": os.path.isfile(src)}}, open({str(log)!r}, "w"))
doc = {doc!r}
mode = argv[0]
info = {{"capture_id": "cap-0123456789ab", "kernel": "matmul_bf16", "device": "NVIDIA H200",
        "relocated": False, "moved_ranges": [], "patched_pointer_words": 0, "regions": 2,
        "restored_bytes": 1310720, "reservations": 1, "restore_seconds": 0.01,
        "restore_gbps": 0.13, "upload_bytes": 1310720, "upload_seconds": 0.005,
        "upload_gbps": 0.26, "upload_workers": 4, "launch_ms": 0.042, "warnings": []}}
if doc is None:
    doc = dict(info, command=mode)
    if mode == "validate":
        doc.update({{"result": "pass", "regions_compared": 2, "regions_failing": 0,
                    "region_results": [
            {{"index": 0, "va": "0x7f0000000000", "replay_va": "0x7f0000000000", "kind": "device",
             "name": "buf0", "size": 1048576, "dtype": "f32", "atol": 0.0, "rtol": 1e-05,
             "ulp": 0, "passed": True, "bytes_differing": 8, "elements": 262144,
             "elements_differing": 2, "elements_failing": 0, "nan_mismatches": 0,
             "max_abs_error": 1e-7, "max_rel_error": "inf", "max_ulp_error": 1,
             "first_diff_offset": 64, "first_fail_offset": -1, "samples": []}},
            {{"index": 1, "va": "0x7f0100000000", "replay_va": "0x7f0100000000", "kind": "device",
             "name": "buf1", "size": 262144, "dtype": "bytes", "atol": 0.0, "rtol": 0.0,
             "ulp": 0, "passed": True, "bytes_differing": 0, "elements": 262144,
             "elements_differing": 0, "elements_failing": 0, "nan_mismatches": 0,
             "max_abs_error": 0.0, "max_rel_error": 0.0, "max_ulp_error": 0,
             "first_diff_offset": -1, "first_fail_offset": -1, "samples": []}}]}})
    elif mode == "bench":
        doc.update({{"warmup": 3, "iterations": 5, "cold_l2": "--cold-l2" in argv,
                    "restore_each": True, "restore_bytes_per_iteration": 327680,
                    "min_ms": 0.040, "median_ms": 0.042, "max_ms": 0.050, "mean_ms": 0.043,
                    "stddev_ms": 0.004, "samples_ms": [0.04, 0.041, 0.042, 0.045, 0.05]}})
if doc != "":
    print(json.dumps(doc, indent=2))
sys.stderr.write({stderr!r})
sys.exit({exit_code})
"""
    path.write_text(script)
    path.chmod(0o755)
    return str(path)


def read_fake_replayer_log(directory: str) -> dict:
    return json.loads((Path(directory) / "replay-argv.json").read_text())
