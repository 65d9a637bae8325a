#!/usr/bin/env python3
"""Runs the shim's GPU cases under a real kerncapd and agent.

    python3 run_gpu_shim_tests.py [--build DIR] [--logs DIR] [--python PY] [CASE...]

DIR is a build tree or the GPU bundle (deploy/gpu/bundle.sh): bin/kerncapd,
bin/kerncapctl, lib/libkerncap_agent.so (default $KERNCAP_BUILD_DIR, else
./build). For each case (tests/gpu/*.py here, default all) a fresh kerncapd
is started on a temporary store, and the case runs with:

    CUDA_INJECTION64_PATH=<agent>          the agent, as the driver loads it
    KERNCAP_TRITON_SHIM=1 + PYTHONPATH      the shim, activated like a user
                                            would without installing it
    TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR  fresh, so everything compiles
    KERNCAP_CTL, KERNCAP_CTL_SOCKET         for the case to arm and inspect
    KERNCAP_REPLAY_LIB, PATH += DIR/bin     for the reproducer's run.py (DIR/lib/
                                            libkerncap_replay.so, kerncap-replay)

After its own checks each case generates the Triton reproducer of its
capture (kerncapctl repro) and runs the project's run.py: the captured
configuration (must pass and build the captured binary), an edited kernel.py
(must fail, naming the buffer), another num_warps (must pass), and for the
matmul other block sizes with their grid; --bench of the unchanged kernel
must time about 1.0x (gpu_case.check_reproducer). KERNCAP_SHIM_REPRO=0 (or
--env KERNCAP_SHIM_REPRO=0) leaves that out.

Cases: triton_inplace (heuristics), triton_matmul_autotune (4 candidates),
torch_compile_model (Inductor), triton_many_configs (20 candidates, the
winner compiled third), triton_tma_scratch (device TMA descriptors in global
scratch, buffers sharing a segment, a wrong result in one), triton_assert_debug
(device asserts, TRITON_DEBUG=1, torch's ptxas), triton_app_helpers (helpers
from the application's package, which is gone when run.py runs),
torch_compile_warm (a second process on warm Inductor/Triton caches). All
eight take longer than one 10-minute device call: run them in groups, e.g.
`... --build DIR triton_inplace triton_matmul_autotune torch_compile_model
triton_many_configs` and `... triton_tma_scratch triton_assert_debug
triton_app_helpers torch_compile_warm`.

Output lines "[ OK ] case", "[ FAILED ] case", "[ SKIPPED ] case: why"
(the format deploy/gpu/run_gpu_tests.sh summarises); logs per case in
--logs. Exit status 0 when every case passed or skipped, 1 otherwise.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM_SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")
CASES = ["triton_inplace", "triton_matmul_autotune", "torch_compile_model", "triton_many_configs",
         "triton_tma_scratch", "triton_assert_debug", "triton_app_helpers", "torch_compile_warm",
         "torch_compile_graph"]


def start_daemon(build, tmp, log):
    sock = os.path.join(tmp, "ctl.sock")
    cmd = [os.path.join(build, "bin", "kerncapd"), "--store=" + os.path.join(tmp, "store"),
           "--socket=" + sock, "--agent-socket=" + os.path.join(tmp, "agent.sock"), "--log-level=debug"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        if os.path.exists(sock):
            return proc, sock
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("kerncapd did not start (see %s)" % log.name)


def stop_daemon(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_case(name, args):
    case_dir = os.path.join(args.logs, name + args.tag)
    os.makedirs(case_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="kc_shim_gpu_%s_" % name)
    try:
        with open(os.path.join(case_dir, "kerncapd.log"), "w") as dlog:
            daemon, sock = start_daemon(args.build, tmp, dlog)
            try:
                env = dict(os.environ)
                env.update({
                    "CUDA_INJECTION64_PATH": os.path.join(args.build, "lib", "libkerncap_agent.so"),
                    "KERNCAP_AGENT_SOCKET": os.path.join(tmp, "agent.sock"),
                    "KERNCAP_AGENT_LOG": "info",
                    "KERNCAP_TRITON_SHIM": "1",
                    "KERNCAP_SHIM_DEBUG": "1",
                    "TRITON_CACHE_DIR": os.path.join(tmp, "triton-cache"),
                    "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor-cache"),
                    "KERNCAP_CTL": os.path.join(args.build, "bin", "kerncapctl"),
                    "KERNCAP_CTL_SOCKET": sock,
                    "PYTHONUNBUFFERED": "1",
                    "KERNCAP_CASE_LOG_DIR": case_dir,
                    "KERNCAP_PYTHON": args.python,
                })
                # The reproducer's replay library (reproducer/replay/capi).
                lib = os.path.join(args.build, "lib", "libkerncap_replay.so")
                if os.path.exists(lib):
                    env["KERNCAP_REPLAY_LIB"] = lib
                env["PATH"] = os.pathsep.join([os.path.join(args.build, "bin"), env.get("PATH", "")])
                for kv in args.env:
                    k, _, v = kv.partition("=")
                    env[k] = v
                # The shim's sitecustomize directory activates it in this
                # interpreter and its children (Inductor's compile workers).
                paths = [os.path.join(SHIM_SRC, "kerncap_shim", "_site"), SHIM_SRC, HERE]
                old = env.get("PYTHONPATH")
                env["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
                t0 = time.time()
                with open(os.path.join(case_dir, "output.txt"), "w") as out:
                    try:
                        r = subprocess.run([args.python, os.path.join(HERE, name + ".py")], env=env, stdout=out,
                                           stderr=subprocess.STDOUT, timeout=args.timeout, check=False)
                        rc = r.returncode
                    except subprocess.TimeoutExpired:
                        rc = "timeout"
                took = time.time() - t0
            finally:
                stop_daemon(daemon)
        with open(os.path.join(case_dir, "output.txt")) as f:
            text = f.read()
        return rc, took, text
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("KERNCAP_BUILD_DIR", "build"))
    ap.add_argument("--logs", default=os.environ.get("KERNCAP_GPU_LOG_DIR", os.path.join(os.getcwd(),
                                                                                        "shim-gpu-logs")))
    ap.add_argument("--python", default=os.environ.get("KERNCAP_PYTHON", sys.executable))
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case")
    ap.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                    help="extra environment for the cases (repeatable)")
    ap.add_argument("--tag", default="", help="suffix for the log folders (repeated runs)")
    ap.add_argument("cases", nargs="*", default=CASES)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    os.makedirs(args.logs, exist_ok=True)
    for f in ("bin/kerncapd", "bin/kerncapctl", "lib/libkerncap_agent.so"):
        if not os.path.exists(os.path.join(args.build, f)):
            print("[ FAILED ] setup: %s missing in %s" % (f, args.build))
            return 1
    repro_off = any(kv.startswith("KERNCAP_SHIM_REPRO=") and kv.split("=", 1)[1] in ("", "0")
                    for kv in args.env) or os.environ.get("KERNCAP_SHIM_REPRO", "1") in ("", "0")
    if not repro_off and not os.path.exists(os.path.join(args.build, "lib", "libkerncap_replay.so")):
        print("[ FAILED ] setup: lib/libkerncap_replay.so missing in %s (the reproducer checks need it; "
              "KERNCAP_SHIM_REPRO=0 leaves them out)" % args.build)
        return 1
    failed = 0
    for name in args.cases:
        rc, took, text = run_case(name, args)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if rc == 0:
            print("[ OK ] %s (%.1f s)" % (name, took))
        elif rc == 77:
            why = next((ln for ln in lines if ln.startswith("SKIP")), "skipped")
            print("[ SKIPPED ] %s: %s" % (name, why))
        else:
            failed += 1
            print("[ FAILED ] %s (exit %s, %.1f s)" % (name, rc, took))
            for ln in lines[-25:]:
                print("    " + ln)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
