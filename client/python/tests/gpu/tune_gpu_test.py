#!/usr/bin/env python3
"""GPU test of kerncap.tune over the real `kerncap-replay serve` (resident
mode) on a GPU: a synthetic capture of add_one (one thread per element,
(*table)[i] += 1 for i < n; the replay tests' kernel) whose captured code
object is a SLOW build of it (every thread spins ~200k cycles first), and a
reproducer folder whose sources are the PTX with two placeholders:

    @SPIN@   the spin code, or nothing   -> the faster valid variant to find
    @STEP@   1 (right) or 2 (wrong)      -> must be rejected: validation fails

plus launch configurations, some of which do not cover the n elements
(launch-shape dependent: must be rejected as such, not as wrong candidates).

    tune_gpu_test.py --build DIR [--keep]

DIR holds bin/kerncap-replay (a build dir or the GPU bundle). kerncap is
imported as installed, else from this repository's client/python/src (the
protocol descriptors must have been compiled there: the bundle does it).
Exit 0 pass, 1 fail, 77 no GPU. Checks: the best candidate has no spin and
step 1 and is > 2x faster than the captured (slow) code object; every step-2
candidate and every non-covering launch is rejected with the right verdict.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

import kerncap  # noqa: E402
from kerncap import tune as kt  # noqa: E402
from kerncap._pb import pb  # noqa: E402

N = 100000
TABLE_VA = 0x7F2A00000000
DATA_VA = 0x7F2A00200000

# The kernel is the replay tests' add_one, read from its one source,
# reproducer/replay/testing/add_one_ptx.h (the GPU bundle copies it next to
# this file), with the two placeholders put in.
def add_one_ptx_template() -> str:
    for header in (HERE / "add_one_ptx.h",
                   HERE.parents[3] / "reproducer" / "replay" / "testing" / "add_one_ptx.h"):
        if header.is_file():
            break
    else:
        sys.exit("tune_gpu_test: add_one_ptx.h not found beside this file or in the repository")
    m = re.search(r'kAddOnePtx\[\] = R"\((.*?)\)";', header.read_text(), re.S)
    if m is None:
        sys.exit(f"tune_gpu_test: no kAddOnePtx raw string in {header}")
    ptx = m.group(1)
    for anchor, replacement in (("  .reg .b64 %rd<8>;\n", "  .reg .b64 %rd<8>;\n@SPIN@\n"),
                                ("  add.s64 %rd7, %rd7, 1;\n", "  add.s64 %rd7, %rd7, @STEP@;\n")):
        if ptx.count(anchor) != 1:
            sys.exit(f"tune_gpu_test: {header}'s PTX no longer has {anchor.strip()!r} once; "
                     "update the placeholders here")
        ptx = ptx.replace(anchor, replacement)
    return ptx


PTX = add_one_ptx_template()
SPIN = """  .reg .pred %spin_p;
  .reg .b64 %spin_t<3>;
  mov.u64 %spin_t0, %clock64;
SPIN:
  mov.u64 %spin_t1, %clock64;
  sub.s64 %spin_t2, %spin_t1, %spin_t0;
  setp.lt.s64 %spin_p, %spin_t2, 200000;
  @%spin_p bra SPIN;"""

MAKEFILE = """FLAGS :=
BUILD := build
BUILT_CODE := build/kernel.ptx
recompile: $(BUILT_CODE)
$(BUILT_CODE): src/kernel.ptx
\t@mkdir -p $(BUILD)
\tcp src/kernel.ptx $@
.PHONY: recompile
"""


def chunk_list(data: bytes, chunks: dict, chunk_size: int = 64 << 10):
    import hashlib
    lst = pb.ChunkList(size=len(data), chunk_size=chunk_size)
    for off in range(0, len(data), chunk_size):
        c = data[off:off + chunk_size]
        if not any(c):
            lst.chunk_digests.append(b"")
            continue
        d = hashlib.sha256(c).digest()
        chunks[d] = c
        lst.chunk_digests.append(d)
    return lst


def write_capture(path: str) -> None:
    chunks: dict = {}
    table = struct.pack("<Q", DATA_VA)
    data = b"".join(struct.pack("<Q", i * 3) for i in range(N))
    post = b"".join(struct.pack("<Q", i * 3 + 1) for i in range(N))
    m = pb.CaptureManifest(capture_id="cap-tune-gpu", post_complete=True)
    m.kernel.mangled_name = "add_one"
    m.kernel.platform = pb.PLATFORM_CUDA
    for va, pre, after in ((TABLE_VA, table, table), (DATA_VA, data, post)):
        r = m.pre.regions.add(va=va, kind=pb.REGION_DEVICE)
        r.data.CopyFrom(chunk_list(pre, chunks))
        p = m.post.regions.add(va=va, kind=pb.REGION_DEVICE)
        p.data.CopyFrom(chunk_list(after, chunks))
    co = m.code_objects.add(format=pb.CODE_OBJECT_PTX, name="slow.ptx")
    co.data.CopyFrom(chunk_list(PTX.replace("@SPIN@", SPIN).replace("@STEP@", "1").encode(), chunks))
    m.launch.grid.append((N + 255) // 256)
    m.launch.block.append(256)
    m.argument_blob = struct.pack("<QI", TABLE_VA, N)
    m.arguments.add(offset=0, size=8)
    m.arguments.add(offset=8, size=4)
    with kerncap.KcapWriter(path) as w:
        w.append(pb.TransferFrame(manifest=m, chunks_total=len(chunks)))
        for d, c in chunks.items():
            w.append(pb.TransferFrame(chunk=pb.TransferChunk(digest=d, raw_size=len(c),
                                                             codec=pb.CODEC_RAW, data=c)))
        w.finish()


def write_project(d: Path) -> Path:
    p = d / "proj"
    (p / "src").mkdir(parents=True)
    (p / "code").mkdir()
    write_capture(str(p / "capture.kcap"))
    (p / "code" / "kernel.ptx").write_text(PTX.replace("@SPIN@", SPIN).replace("@STEP@", "1"))
    (p / "src" / "kernel.ptx").write_text(PTX)
    (p / "kerncap.json").write_text(json.dumps({"schema": "kerncap.reproducer", "kind": "source",
                                                "code_object": {"file": "code/kernel.ptx"}}))
    (p / "Makefile").write_text(MAKEFILE)
    return p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("KERNCAP_BUILD_DIR", ""))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    replay = Path(args.build) / "bin" / "kerncap-replay"
    if not replay.is_file():
        print(f"tune_gpu_test: no {replay}", file=sys.stderr)
        return 1
    os.environ["KERNCAP_REPLAY"] = str(replay)
    d = Path(tempfile.mkdtemp(prefix="kc-tune-gpu-"))
    try:
        proj = write_project(d)
        space = {"subst.@SPIN@": [SPIN, ""], "subst.@STEP@": ["1", "2"],
                 "launch.block": [[128], [256]], "launch.grid": [[(N + 127) // 128], [100]]}
        try:
            doc = kt.tune(proj, space, iterations=20, warmup=3, log=print)
        except kerncap.NoDevice as e:
            print(f"tune_gpu_test: SKIPPED: {e}")
            return 77
        print(doc["table"])
        ok = True

        def check(cond, what):
            nonlocal ok
            print(("ok   " if cond else "FAIL ") + what)
            ok = ok and bool(cond)

        base = doc["baseline"]
        check(base["verdict"] == "pass", f"the captured (slow) code object validates: {base['verdict']}")
        best = doc["best"]
        check(best is not None, "a best candidate was found")
        if best:
            check(best["params"]["subst.@SPIN@"] == "" and best["params"]["subst.@STEP@"] == "1",
                  f"the best has no spin and step 1: {best['params']}")
            check((best["speedup"] or 0) > 2, f"the best is > 2x the captured kernel: {best['speedup']}")
            check(Path(doc["best_dir"], "build.sh").is_file(), "best/build.sh written")
        for r in doc["results"]:
            p = r["params"]
            covering = p["launch.grid"][0] * p["launch.block"][0] >= N
            if covering and p["subst.@STEP@"] == "2":
                check(r["verdict"] == "fail", f"step 2 at a covering launch fails: {p} -> {r['verdict']}")
            if not covering:
                check(r["verdict"] == "launch_shape_dependent",
                      f"a launch that does not cover n is launch-shape dependent: {p} -> {r['verdict']}")
            if covering and p["subst.@STEP@"] == "1":
                check(r["valid"], f"step 1 at a covering launch is valid: {p} -> {r['verdict']} {r['reason']}")
        print("tune_gpu_test:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
