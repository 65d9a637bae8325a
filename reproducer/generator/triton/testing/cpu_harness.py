"""CPU harness for Triton reproducers (triton_project_test.cc): the real
Triton JIT and compiler with python_shim's fake driver (nothing loads or
launches), so a generated run.py can be checked for building the *same
binary* as the one captured, without a GPU.

    python cpu_harness.py capture OUT_DIR
        compiles an autotuned matmul (module OUT_DIR/kc_cpu_matmul.py) the way
        an application would, with the Triton shim recording; writes
        OUT_DIR/doc.json (the shim's document), OUT_DIR/kernel.cubin (the
        chosen config's binary) and OUT_DIR/launch.json (the captured
        launch: grid, block, kernel parameters [{size, hex}] in order)
    python cpu_harness.py run PROJECT_DIR [run.py arguments...]
        runs PROJECT_DIR/run.py's main() with a stand-in kerncap_replay
        (identity addresses, validation passes) and the fake driver; prints
        run.py's --json document

Needs triton (and python_shim/src, python_shim/tests on PYTHONPATH).
"""
import hashlib
import json
import os
import runpy
import struct
import sys
import types

MODULE = '''"""Autotuned matmul (kerncap CPU harness fixture)."""
import sys

import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=8, num_stages=4),
]


@triton.jit
def _scale(x, alpha):
    return x * alpha


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def kc_cpu_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = _scale(acc, alpha)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


if __name__ == "__main__":
    sys.exit("run through the harness")
'''

A, B, C = 0x7f0000000000, 0x7f0000100000, 0x7f0000200000
M, N, K = 1024, 768, 512
ALPHA = -1.25
PACK = {"i32": "<i", "i64": "<q", "u32": "<I", "u64": "<Q", "fp32": "<f", "fp16": "<e", "fp64": "<d",
        "i1": "<b", "u1": "<B", "i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H"}


def capture(out_dir):
    import triton  # pylint: disable=import-outside-toplevel
    import fake_triton_driver as fd  # pylint: disable=import-outside-toplevel
    fd.activate(timing=lambda i: [2.0, 1.0][i % 2])  # the second config wins
    from kerncap_shim import _state  # pylint: disable=import-outside-toplevel
    calls = []

    def agent(name, data):
        calls.append((name.decode(), data))
        return 0

    _state.SHIM.install(agent=agent)
    path = os.path.join(out_dir, "kc_cpu_matmul.py")
    with open(path, "w") as f:
        f.write(MODULE)
    sys.path.insert(0, out_dir)
    import kc_cpu_matmul as mod  # pylint: disable=import-outside-toplevel
    a, b, c = (fd.FakeTensor(p, "float16") for p in (A, B, C))
    args = (a, b, c, M, N, K, K, 1, N, 1, N, 1, ALPHA)
    mod.kc_cpu_matmul[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))](*args)
    doc = json.loads([d for n, d in calls if n == "kc_cpu_matmul"][-1])
    best = mod.kc_cpu_matmul.best_config
    cur = next(v for v in doc["variants"] if v["id"] == doc["current"])
    want = cur["binary"]["sha256"]
    jit = mod.kc_cpu_matmul.fn
    cubin = None
    for cache in jit.device_caches.values():
        for kernel in cache[0].values():
            data = kernel.asm["cubin"]
            if hashlib.sha256(data).hexdigest() == want:
                cubin = data
    if cubin is None:
        sys.exit("the current variant's cubin was not found in the JIT cache")
    # The kernel's parameters as the driver receives them: the non-constexpr
    # signature entries, then Triton's global and profile scratch pointers.
    params, values = [], dict(zip(jit.arg_names, (A, B, C) + args[3:]))
    for name, ty in cur["signature"].items():
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            params.append({"size": 8, "hex": struct.pack("<Q", values[name]).hex()})
        else:
            raw = struct.pack(PACK[ty], values[name])
            params.append({"size": len(raw), "hex": raw.hex()})
    params += [{"size": 8, "hex": "00" * 8}] * 2
    launch = {"grid": [triton.cdiv(M, best.kwargs["BLOCK_M"]), triton.cdiv(N, best.kwargs["BLOCK_N"]), 1],
              "block": [best.num_warps * 32, 1, 1], "params": params, "regions": [A, B, C],
              "chosen": {"kwargs": best.kwargs, "num_warps": best.num_warps}}
    with open(os.path.join(out_dir, "doc.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(out_dir, "kernel.cubin"), "wb") as f:
        f.write(cubin)
    with open(os.path.join(out_dir, "launch.json"), "w") as f:
        json.dump(launch, f)


class FakeReplay:
    """kerncap_replay.Replay without a GPU: every address is its own."""

    calls = []

    def __init__(self, capture_path, device=-1, allow_relocation=True, force_relocation=False,
                 code_object=None, library=None):
        if not os.path.isfile(capture_path):
            raise FakeReplayError("no capture at %s" % capture_path)
        FakeReplay.calls.append(("open", os.path.basename(capture_path)))
        self.prepared = False

    info = property(lambda self: {"device": {"ordinal": 0}, "relocated": False, "prepared": self.prepared})

    def prepare(self):
        FakeReplay.calls.append(("prepare",))
        self.prepared = True
        return self.info

    def translate(self, va):
        return va if self.prepared else 0

    def launch(self):
        FakeReplay.calls.append(("launch",))
        return 1.0

    def restore_inputs(self):
        FakeReplay.calls.append(("restore_inputs",))

    def validate(self, atol=0.0, rtol=0.0, ulp=0, dtype=None, regions=None):
        FakeReplay.calls.append(("validate", {"atol": atol, "rtol": rtol, "ulp": ulp, "dtype": dtype,
                                              "regions": regions}))
        return {"pass": True, "regions_compared": 3, "differing": [], "within_tolerance": []}

    def close(self):
        FakeReplay.calls.append(("close",))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class FakeReplayError(RuntimeError):
    pass


def run(project, argv):
    binding = types.ModuleType("kerncap_replay")
    binding.Replay = FakeReplay
    binding.ReplayError = FakeReplayError
    sys.modules["kerncap_replay"] = binding
    import fake_triton_driver as fd  # pylint: disable=import-outside-toplevel
    drv = fd.activate()
    ns = runpy.run_path(os.path.join(project, "run.py"), run_name="kerncap_run")
    import io  # pylint: disable=import-outside-toplevel
    out = io.StringIO()
    real = sys.stdout
    sys.stdout = out
    try:
        rc = ns["main"](argv)
    finally:
        sys.stdout = real
    doc = json.loads(out.getvalue()) if out.getvalue().strip() else {}
    doc["harness"] = {"rc": rc, "launches": drv.launches, "replay_calls": FakeReplay.calls}
    print(json.dumps(doc, default=str))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "capture":
        capture(argv[2])
        return 0
    if len(argv) >= 3 and argv[1] == "run":
        return run(argv[2], argv[3:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
