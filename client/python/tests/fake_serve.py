"""A stand-in for `kerncap-replay serve` (CPU tests of kerncap.tune and the MCP
server's evaluate_candidate) and a fake reproducer project for it.

The stand-in speaks the resident-mode protocol (reproducer/replay/serve/
protocol.h: one JSON object per line on a Unix socket) and answers from the
candidate's bytes and launch, by fixed rules, so a test knows which candidate
must win:
  the captured code object ("captured"), captured launch   1.00 ms, pass
  built with -maxrregcount=64                              0.80 ms
  the source's TILE set to 32                              0.70 ms
  --use_fast_math                                          verdict fail
  launch block [128]                                       x0.9
  launch block [512]                                       launch_shape_dependent
  launch block [2048]                                      ok:false INVALID_ARGUMENT
  a code object containing "FAULT"                         context_lost, the server exits 3
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

SERVER = r'''#!{python}
import json, os, socket, sys
argv = sys.argv[1:]
if argv[0] != "serve":
    sys.exit(2)
sock_path = [a.split("=", 1)[1] for a in argv if a.startswith("--socket=")][0]
log = open(sock_path + ".requests", "a")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sock_path)
srv.listen(4)

def evaluate(req):
    code = open(req["code_object_path"], errors="replace").read()
    launch = req.get("launch") or {{}}
    block = launch.get("block")
    if block == [2048]:
        return {{"ok": False, "error": "launch override: block (2048,1,1) has 2048 threads; at most 1024",
                "code": "INVALID_ARGUMENT"}}
    if "FAULT" in code:
        return {{"ok": False, "error": "the candidate faulted: CUDA_ERROR_ILLEGAL_ADDRESS",
                "code": "INTERNAL", "context_lost": True}}
    ms = 1.0
    if "-maxrregcount=64" in code:
        ms = 0.8
    if "TILE 32" in code:
        ms = 0.7
    v = "pass"
    probe = None
    if "--use_fast_math" in code:
        v = "fail"
    if block == [128]:
        ms *= 0.9
    if block == [512]:
        v = "launch_shape_dependent"
        probe = {{"captured_code_at_override": "fail", "captured_code_at_captured_launch": "pass"}}
    val = {{"passed": v == "pass", "verdict": v, "regions_compared": 2,
           "regions_failing": 0 if v == "pass" else 1, "not_compared": [],
           "regions": [] if v == "pass" else [{{"index": 1, "va": "0x7f0000000000", "name": "",
                                              "passed": False, "mismatches": 10,
                                              "worst_abs": 0.5, "first_mismatch_offset": 64}}]}}
    if probe:
        val["shape_probe"] = probe
    a = {{"ok": True, "op": "evaluate", "kernel": "k", "validation": val,
         "verdicts_pass": v == "pass",
         "kernel_ms": {{"min": ms, "median": ms, "max": ms, "mean": ms, "stddev": 0,
                       "iterations": req.get("iterations", 10)}}}}
    if launch:
        a["launch"] = "grid=(1,1,1) block=(%s,1,1) smem=0" % (block or [1])[0]
    if req.get("compare_original"):
        a["original_ms"] = {{"median": 1.0}}
        a["speedup"] = 1.0 / ms
    return a

while True:
    conn, _ = srv.accept()
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    if not buf:
        conn.close()
        continue
    req = json.loads(buf)
    log.write(json.dumps(req) + "\n")
    log.flush()
    op = req.get("op")
    if op == "info":
        ans = {{"ok": True, "op": "info", "capture_id": "cap-fake"}}
    elif op == "shutdown":
        ans = {{"ok": True, "op": "shutdown"}}
    else:
        ans = evaluate(req)
    ans["id"] = req.get("id")
    conn.sendall((json.dumps(ans) + "\n").encode())
    conn.close()
    if op == "shutdown" or ans.get("context_lost"):
        os.unlink(sock_path)
        sys.exit(0 if op == "shutdown" else 3)
'''

MAKEFILE = """FLAGS := -O3 -arch=sm_90
BUILD := build
BUILT_CODE := build/kernel.cubin
CAPTURE := capture.kcap

recompile: $(BUILT_CODE)

$(BUILT_CODE): src/kernel.cu src/tile.h
\t@: flags unquoted as on a generated compiler line: $(FLAGS)
\t@case "$(FLAGS)" in *-bad*) echo "nvcc fatal   : Unknown option '-bad'" >&2; exit 1;; esac
\t@mkdir -p $(BUILD)
\t@{ echo "$(FLAGS)"; cat src/kernel.cu src/tile.h; } > $@

.PHONY: recompile
"""


def write_server(directory: str) -> str:
    path = Path(directory) / "fake-serve-replay"
    path.write_text(SERVER.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def write_project(directory: str) -> str:
    p = Path(directory) / "proj"
    (p / "src").mkdir(parents=True)
    (p / "code").mkdir()
    (p / "kerncap.json").write_text(json.dumps(
        {"schema": "kerncap.reproducer", "kind": "source",
         "code_object": {"file": "code/kernel.cubin", "format": "cubin"}}))
    (p / "capture.kcap").write_text("not a real capture: the stand-in server never reads it")
    (p / "code" / "kernel.cubin").write_text("captured")
    (p / "src" / "kernel.cu").write_text('#include "tile.h"\n__global__ void k(float* x) { x[0] = UNROLL_BY; }\n')
    (p / "src" / "tile.h").write_text("#pragma once\n#define TILE 16\n#define UNROLL_BY @UNROLL@\n")
    (p / "Makefile").write_text(MAKEFILE)
    return str(p)
