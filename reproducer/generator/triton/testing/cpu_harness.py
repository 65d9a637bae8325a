"""CPU harness for Triton reproducers (triton_project_test.cc): the real
Triton JIT and compiler with python_shim's fake driver (nothing loads or
launches), so a generated run.py can be checked for building the *same
binary* as the one captured, and for the verdicts it gives, without a GPU.

    python cpu_harness.py capture SCENARIO OUT_DIR
        compiles SCENARIO's kernel (its module, and for "helpers_pkg" a
        package, written under OUT_DIR) the way an application would, with
        the Triton shim recording; writes OUT_DIR/doc.json (the shim's
        document), OUT_DIR/kernel.cubin (the binary of the launch that is
        "captured"), OUT_DIR/launch.json (grid, block, kernel parameters
        [{size, hex}] in order, regions [{va, size, fill}]) and
        OUT_DIR/world.json (the captured memory: pre and post images of
        every region, for the stand-in replay library)
    python cpu_harness.py run PROJECT_DIR [run.py arguments...]
        runs PROJECT_DIR/run.py's main() with a stand-in kerncap_replay that
        holds the world's memory (KC_HARNESS_WORLD=world.json: identity
        addresses, restore_inputs, validate against the post image, a
        launch of the captured binary that writes the post image, bench),
        a stand-in for run.py's device memory access, and the fake driver,
        whose launches of kernel.py apply KC_HARNESS_EFFECT (effect.json:
        what "the rebuilt kernel" writes); prints run.py's --json document
        with a "harness" section (rc, launches, replay calls, scratch
        pointers the launches got)

Scenarios: matmul (autotuned, helpers in its module), many_configs (20
candidates, the winner compiled third), assert_ptxas (device asserts,
TRITON_DEBUG=1 and a ptxas wrapper that changes the code), helpers_pkg
(helpers imported from the application's package), scratch_shared (device
TMA descriptors in Triton's global scratch, sharing one allocation with the
kernel's tensors), shared_mixed (an fp16 and an fp32 output in one
allocation).

Needs triton (and python_shim/src, python_shim/tests on PYTHONPATH).
"""
import hashlib
import json
import os
import runpy
import shutil
import stat
import struct
import sys
import types

PACK = {"i32": "<i", "i64": "<q", "u32": "<I", "u64": "<Q", "fp32": "<f", "fp16": "<e", "fp64": "<d",
        "i1": "<b", "u1": "<B", "i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H"}

# ---------------------------------------------------------------------------
# Scenarios: module texts

MATMUL = '''"""Autotuned matmul (kerncap CPU harness fixture)."""
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

MANY_CONFIGS = '''"""An autotuner with more candidates than the shim keeps variants."""
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=2)
           for b in (32, 64, 128, 256, 512) for w in (1, 2, 4, 8)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def kc_cpu_many(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)
'''

ASSERT = '''"""A kernel with device asserts (kerncap CPU harness fixture): compiled
with TRITON_DEBUG=1, their messages name this file and its lines."""
import triton
import triton.language as tl


@triton.jit
def _checked(x):
    tl.device_assert(x >= 0, "negative input")
    return x


@triton.jit
def kc_cpu_assert(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = _checked(tl.load(x_ptr + offs, mask=mask))
    tl.device_assert(offs < n + BLOCK, "offset out of range")
    tl.store(y_ptr + offs, x * 2.0, mask=mask)
'''

# The application's package: the kernel imports helpers, a constexpr and a
# constexpr function from other modules of it; the package's __init__
# imports something that exists only in the application.
PKG_FILES = {
    "kc_app_pkg/__init__.py": '''"""The application (kerncap CPU harness fixture)."""
import kc_app_only_dependency  # noqa: F401  (not installed anywhere: the reproducer must not import this)
''',
    "kc_app_pkg/consts.py": '''import triton.language as tl

OFFSET = tl.constexpr(0.5)
UNUSED = tl.constexpr(7)
''',
    "kc_app_pkg/ops/__init__.py": "",
    "kc_app_pkg/ops/utils.py": '''import triton
import triton.language as tl

from ..consts import OFFSET

SCALE = tl.constexpr(3.0)


@triton.constexpr_function
def half_block(b):
    return b // 2


@triton.jit
def scale_helper(x):
    return x * SCALE + OFFSET


@triton.jit
def other_helper(x, y):
    return tl.maximum(x, y)


def application_only():
    import kc_app_only_dependency  # noqa: F401
''',
    "kc_app_pkg/ops/kernels.py": '''"""The kernel, in the application's package."""
import triton
import triton.language as tl

import kc_app_pkg.ops.utils as U
from kc_app_pkg.ops.utils import scale_helper, half_block
from ..consts import OFFSET


@triton.jit
def kc_cpu_pkg(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    h = tl.arange(0, half_block(BLOCK))
    y = U.other_helper(scale_helper(x), OFFSET)
    tl.store(y_ptr + offs, y, mask=mask)
    tl.store(y_ptr + h, tl.load(x_ptr + h) + 1.0)
''',
}

SCRATCH = '''"""Device-side TMA descriptors: Triton writes them into its global scratch."""
import triton
import triton.language as tl


@triton.jit
def kc_cpu_tma(src_ptr, dst_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    s = tl.make_tensor_descriptor(src_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    d = tl.make_tensor_descriptor(dst_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = s.load([pid_m * BM, pid_n * BN])
    d.store([pid_m * BM, pid_n * BN], x * 2.0)
'''

MIXED = '''"""Two outputs of different element types (one allocation holds them)."""
import triton
import triton.language as tl


@triton.jit
def kc_cpu_mixed(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, x * 0.25, mask=mask)
    tl.store(z_ptr + offs, (x + 1.0).to(tl.float16), mask=mask)
'''

SEG = 0x7f0000000000  # where the harness's allocations live


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_ptxas(out_dir):
    """A ptxas that is not Triton's: the bundled one with another
    optimisation level (a different binary from the same PTX)."""
    from triton.backends.nvidia import compiler  # pylint: disable=import-outside-toplevel
    real = compiler.get_ptxas(90).path
    path = os.path.join(out_dir, "app-toolkit", "bin", "ptxas")
    write(path, '#!/bin/sh\n# The application\'s ptxas (kerncap CPU harness): -O1\n'
                'case "$1" in --version) "%s" --version; echo "(kerncap CPU harness wrapper: -O1)"; exit 0;; esac\n'
                'exec "%s" -O1 "$@"\n' % (real, real))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def scenario(name, out_dir, fd, triton):
    """Writes the scenario's sources, imports its kernel and launches it as
    the application would. Returns (jit wrapper, args, grid, regions,
    chosen config or None, world patches)."""
    if name == "matmul":
        write(os.path.join(out_dir, "kc_cpu_matmul.py"), MATMUL)
        sys.path.insert(0, out_dir)
        import kc_cpu_matmul as mod  # pylint: disable=import-outside-toplevel
        m, n, k = 1024, 768, 512
        a, b, c = (fd.FakeTensor(p, "float16", shape=s) for p, s in
                   ((SEG, (m, k)), (SEG + 0x100000, (k, n)), (SEG + 0x200000, (m, n))))
        args = (a, b, c, m, n, k, k, 1, n, 1, n, 1, -1.25)
        fn = mod.kc_cpu_matmul
        fd.activate(timing=lambda i: [2.0, 1.0][i % 2])  # the second config wins
        fn[lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))](*args)
        best = fn.best_config
        grid = [triton.cdiv(m, best.kwargs["BLOCK_M"]), triton.cdiv(n, best.kwargs["BLOCK_N"]), 1]
        regions = [{"va": SEG + i * 0x100000, "size": 0x10000, "fill": 2} for i in range(3)]
        return fn, args, grid, regions, best
    if name == "many_configs":
        write(os.path.join(out_dir, "kc_cpu_many.py"), MANY_CONFIGS)
        sys.path.insert(0, out_dir)
        import kc_cpu_many as mod  # pylint: disable=import-outside-toplevel
        n = 4096
        x, y = fd.FakeTensor(SEG, shape=(n,)), fd.FakeTensor(SEG + 0x100000, shape=(n,))
        fd.activate(timing=lambda i: 0.5 if i == 2 else 1.0)  # the third candidate wins
        fn = mod.kc_cpu_many
        fn[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        best = fn.best_config
        regions = [{"va": SEG, "size": 4 * n, "fill": 3}, {"va": SEG + 0x100000, "size": 4 * n, "fill": 0}]
        return fn, (x, y, n), [triton.cdiv(n, best.kwargs["BLOCK"]), 1, 1], regions, best
    if name == "assert_ptxas":
        write(os.path.join(out_dir, "app", "kc_cpu_assert.py"), ASSERT)
        os.environ["TRITON_PTXAS_PATH"] = fake_ptxas(out_dir)
        sys.path.insert(0, os.path.join(out_dir, "app"))
        import kc_cpu_assert as mod  # pylint: disable=import-outside-toplevel
        triton.knobs.runtime.debug = True  # as TRITON_DEBUG=1 at start-up
        n = 1000
        x, y = fd.FakeTensor(SEG, shape=(n,)), fd.FakeTensor(SEG + 0x100000, shape=(n,))
        fd.activate()
        fn = mod.kc_cpu_assert
        fn[(8,)](x, y, n, BLOCK=128)
        regions = [{"va": SEG, "size": 4096, "fill": 1}, {"va": SEG + 0x100000, "size": 4096, "fill": 0}]
        return fn, (x, y, n), [8, 1, 1], regions, None
    if name == "helpers_pkg":
        for rel, text in PKG_FILES.items():
            write(os.path.join(out_dir, "app", rel), text)
        # The package's __init__ imports kc_app_only_dependency: provide it
        # to the application only (it is never in the reproducer's path).
        write(os.path.join(out_dir, "app_site", "kc_app_only_dependency.py"), "")
        sys.path[:0] = [os.path.join(out_dir, "app"), os.path.join(out_dir, "app_site")]
        from kc_app_pkg.ops import kernels as mod  # pylint: disable=import-outside-toplevel
        n = 2048
        x, y = fd.FakeTensor(SEG, shape=(n,)), fd.FakeTensor(SEG + 0x100000, shape=(n,))
        fd.activate()
        fn = mod.kc_cpu_pkg
        fn[(16,)](x, y, n, BLOCK=128)
        regions = [{"va": SEG, "size": 4 * n, "fill": 1}, {"va": SEG + 0x100000, "size": 4 * n, "fill": 0}]
        return fn, (x, y, n), [16, 1, 1], regions, None
    if name == "scratch_shared":
        write(os.path.join(out_dir, "kc_cpu_tma.py"), SCRATCH)
        sys.path.insert(0, out_dir)
        import kc_cpu_tma as mod  # pylint: disable=import-outside-toplevel
        m = n = 128
        # One allocation (a caching allocator's segment) holds both tensors
        # and the scratch the application's allocator hands Triton.
        src, dst = fd.FakeTensor(SEG, shape=(m, n)), fd.FakeTensor(SEG + 0x10000, shape=(m, n))
        scratch = SEG + 0x20000
        triton.set_allocator(lambda size, align, stream: fd.FakeTensor(scratch, "int8", shape=(size,)))
        fd.activate()
        fn = mod.kc_cpu_tma
        fn[(2, 2)](src, dst, m, n, BM=64, BN=64)
        regions = [{"va": SEG, "size": 0x30000, "fill": 1}]
        return fn, (src, dst, m, n), [2, 2, 1], regions, None
    if name == "shared_mixed":
        write(os.path.join(out_dir, "kc_cpu_mixed.py"), MIXED)
        sys.path.insert(0, out_dir)
        import kc_cpu_mixed as mod  # pylint: disable=import-outside-toplevel
        n = 1024
        x = fd.FakeTensor(SEG, "float16", shape=(n,))
        y = fd.FakeTensor(SEG + 2 * n, "float32", shape=(n,))       # fp32 output right after x
        z = fd.FakeTensor(SEG + 6 * n, "float16", shape=(n,))       # fp16 output after y
        fd.activate()
        fn = mod.kc_cpu_mixed
        fn[(8,)](x, y, z, n, BLOCK=128)
        regions = [{"va": SEG, "size": 8 * n + 1024, "fill": 0}]
        return fn, (x, y, z, n), [8, 1, 1], regions, None
    raise SystemExit("unknown scenario %r" % name)


def world_images(name, regions, launch_ptrs):
    """Pre and post images of every region: what the captured launch read
    and wrote (fake contents, but at the right places)."""
    out = []
    for i, r in enumerate(regions):
        pre = bytearray([r["fill"]]) * r["size"]
        post = bytearray(pre)
        out.append({"index": i, "va": r["va"], "size": r["size"], "pre": pre, "post": post, "written": False})
    def patch(va, data):
        for r in out:
            if r["va"] <= va and va + len(data) <= r["va"] + r["size"]:
                off = va - r["va"]
                r["post"][off:off + len(data)] = data
                r["written"] = True
                return
        raise SystemExit("patch at 0x%x is in no region" % va)
    if name == "scratch_shared":
        patch(SEG + 0x10000, bytes(range(256)) * 4)          # dst
        patch(launch_ptrs["global_scratch"], b"\xd5" * 1024)  # the TMA descriptors Triton wrote
    elif name == "shared_mixed":
        patch(SEG + 2 * 1024, struct.pack("<1024f", *[0.25 * i for i in range(1024)]))  # y (fp32)
        patch(SEG + 6 * 1024, struct.pack("<1024e", *[1.0 + i % 64 for i in range(1024)]))  # z (fp16)
    else:
        patch(regions[-1]["va"], bytes(range(256)) * 4)
    return out


def capture(name, out_dir):
    import triton  # pylint: disable=import-outside-toplevel
    import fake_triton_driver as fd  # pylint: disable=import-outside-toplevel
    from kerncap_shim import _state  # pylint: disable=import-outside-toplevel
    calls = []

    def agent(kname, data):
        calls.append((kname.decode(), data))
        return 0

    fd.activate()
    _state.SHIM.install(agent=agent)
    launches = []
    fn, args, grid, regions, best = None, None, None, None, None
    drv = fd.activate()
    drv.on_launch = launches.append
    orig_activate = fd.activate

    def activate(**kw):  # keep the launch log across the scenario's own activate()
        d = orig_activate(**kw)
        d.on_launch = launches.append
        return d
    fd.activate = activate
    fn, args, grid, regions, best = scenario(name, out_dir, fd, triton)
    fd.activate = orig_activate
    jit = fn
    while not hasattr(jit, "device_caches"):
        jit = jit.fn
    kname = jit.__name__
    doc = json.loads([d for n, d in calls if n == kname][-1])
    cur = next(v for v in doc["variants"] if v["id"] == doc["current"])
    want = cur["binary"]["sha256"]
    cubin = None
    for cache in jit.device_caches.values():
        for kernel in cache[0].values():
            data = kernel.asm["cubin"]
            if hashlib.sha256(data).hexdigest() == want:
                cubin = data
    if cubin is None:
        sys.exit("the current variant's cubin was not found in the JIT cache")
    last = launches[-1]  # the launch that is "captured"
    # The kernel's parameters as the driver receives them: the non-constexpr
    # signature entries, then Triton's global and profile scratch pointers.
    params, values = [], {}
    for k, v in last["args"].items():
        values[k] = v.data_ptr() if hasattr(v, "data_ptr") else v
    for pname, ty in cur["signature"].items():
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            params.append({"size": 8, "hex": struct.pack("<Q", values[pname]).hex()})
        else:
            raw = struct.pack(PACK[ty], values[pname])
            params.append({"size": len(raw), "hex": raw.hex()})
    for k in ("global_scratch", "profile_scratch"):
        params.append({"size": 8, "hex": struct.pack("<Q", last.get(k) or 0).hex()})
    warps = cur["num_warps"]
    launch = {"kernel": kname, "grid": grid, "block": [warps * 32, 1, 1], "params": params,
              "regions": regions, "chosen": None if best is None else {"kwargs": best.kwargs,
                                                                        "num_warps": best.num_warps},
              "global_scratch": last.get("global_scratch"), "shared": cur.get("shared", 0)}
    world = world_images(name, regions, last)
    with open(os.path.join(out_dir, "doc.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(out_dir, "kernel.cubin"), "wb") as f:
        f.write(cubin)
    with open(os.path.join(out_dir, "launch.json"), "w") as f:
        json.dump(launch, f)
    with open(os.path.join(out_dir, "world.json"), "w") as f:
        json.dump([{"index": r["index"], "va": r["va"], "size": r["size"], "pre": r["pre"].hex(),
                    "post": r["post"].hex(), "written": r["written"]} for r in world], f)
    if name == "helpers_pkg":
        # The reproducer must work where the application's package is not.
        shutil.rmtree(os.path.join(out_dir, "app_site"))


# ---------------------------------------------------------------------------
# The replay library, the device memory and the rebuilt kernel's effect


class World:
    """The captured memory of the world file: regions with their pre and
    post images, and the device memory (starting as the pre image)."""

    def __init__(self, path):
        with open(path) as f:
            regions = json.load(f)
        self.regions = []
        for r in regions:
            self.regions.append({"index": r["index"], "va": r["va"], "size": r["size"],
                                 "pre": bytes.fromhex(r["pre"]), "post": bytes.fromhex(r["post"]),
                                 "written": r["written"], "mem": bytearray.fromhex(r["pre"])})

    def find(self, va, n=1):
        for r in self.regions:
            if r["va"] <= va and va + n <= r["va"] + r["size"]:
                return r
        raise RuntimeError("harness: 0x%x (+%d) is in no captured region" % (va, n))

    def read(self, va, n):
        r = self.find(va, n)
        off = va - r["va"]
        return bytes(r["mem"][off:off + n])

    def write(self, va, data):
        r = self.find(va, len(data))
        off = va - r["va"]
        r["mem"][off:off + len(data)] = data


WORLD = None


class FakeMemory:
    """run.py's DeviceMemory over the world."""

    def read(self, va, n):
        FakeReplay.calls.append(("read", va, n))
        return WORLD.read(va, n)

    def write(self, va, data):
        FakeReplay.calls.append(("write", va, len(data)))
        WORLD.write(va, bytes(data))


ELEM = {"f32": ("<f", 4), "f16": ("<e", 2), "f64": ("<d", 8)}


def compare_region(r, opts):
    """The replay library's comparison of one region (exact, or elementwise
    within atol/rtol for f16/f32/f64): its report entry, None when equal."""
    exp, act = r["post"], bytes(r["mem"])
    if exp == act:
        return None
    dt = opts.get("dtype")
    atol, rtol = float(opts.get("atol") or 0), float(opts.get("rtol") or 0)
    entry = {"index": r["index"], "va": "0x%x" % r["va"], "name": "", "dtype": dt or "bytes"}
    if dt in ELEM and (atol or rtol):
        fmt, size = ELEM[dt]
        fails = diffs = 0
        worst = 0.0
        first = -1
        for off in range(0, len(exp) - len(exp) % size, size):
            e, a = struct.unpack_from(fmt, exp, off)[0], struct.unpack_from(fmt, act, off)[0]
            if exp[off:off + size] == act[off:off + size]:
                continue
            diffs += 1
            err = abs(a - e) if a == a and e == e else float("inf")
            worst = max(worst, err)
            if not err <= atol + rtol * abs(e):
                fails += 1
                if first < 0:
                    first = off
        entry.update(count=fails, elements_differing=diffs, worst_abs=worst, first_fail_offset=first)
        return entry, fails > 0
    first = next(i for i in range(len(exp)) if exp[i] != act[i])
    n = sum(1 for i in range(len(exp)) if exp[i] != act[i])
    entry.update(count=n, elements_differing=n, worst_abs=None, first_fail_offset=first)
    return entry, True


class FakeReplay:
    """kerncap_replay.Replay without a GPU, over the world's memory."""

    calls = []
    bench_report = None
    report_override = None  # effect.json "validate_report": keys replacing validate()'s

    def __init__(self, capture_path, device=-1, allow_relocation=True, force_relocation=False,
                 code_object=None, library=None):
        if not os.path.isfile(capture_path):
            raise FakeReplayError("no capture at %s" % capture_path)
        FakeReplay.calls.append(("open", os.path.basename(capture_path)))
        self.prepared = False

    @property
    def info(self):
        regions = [{"index": r["index"], "captured_va": r["va"], "size": r["size"], "written": r["written"],
                    "name": "", "kind": "device", "restored": self.prepared,
                    "replay_va": r["va"] if self.prepared else 0} for r in WORLD.regions]
        return {"device": {"ordinal": 0}, "relocated": False, "prepared": self.prepared,
                "replay_device": 0, "regions": regions, "kernel": {"name": "?"}}

    def prepare(self):
        FakeReplay.calls.append(("prepare",))
        self.prepared = True
        return self.info

    def translate(self, va):
        if not self.prepared:
            return 0
        try:
            WORLD.find(va)
        except RuntimeError:
            return 0
        return va

    def launch(self):
        """The captured binary: it writes the captured post image."""
        FakeReplay.calls.append(("launch",))
        for r in WORLD.regions:
            if r["written"]:
                r["mem"][:] = r["post"]
        return 1.0

    def restore_inputs(self):
        FakeReplay.calls.append(("restore_inputs",))
        for r in WORLD.regions:
            if r["written"]:
                r["mem"][:] = r["pre"]

    def validate(self, atol=0.0, rtol=0.0, ulp=0, dtype=None, regions=None):
        FakeReplay.calls.append(("validate", {"atol": atol, "rtol": rtol, "ulp": ulp, "dtype": dtype,
                                              "regions": regions}))
        differing, within = [], []
        for r in WORLD.regions:
            opts = {"dtype": dtype, "atol": atol, "rtol": rtol}
            over = (regions or {}).get(str(r["index"]))
            if over:
                opts.update({k: v for k, v in over.items() if v is not None})
            res = compare_region(r, opts)
            if res is None:
                continue
            entry, failed = res
            (differing if failed else within).append(entry)
        rep = {"pass": not differing, "regions_compared": len(WORLD.regions), "differing": differing,
               "within_tolerance": within}
        rep.update(FakeReplay.report_override or {})
        return rep

    def bench(self, variant=None, iterations=100, warmup=10, cold_l2=False, compare_original=None, validate=None):
        FakeReplay.calls.append(("bench", {"variant": variant, "iterations": iterations, "warmup": warmup,
                                           "cold_l2": cold_l2, "compare_original": compare_original,
                                           "validate": validate}))
        if variant is not None and not os.path.isfile(variant):
            raise FakeReplayError("bench: no variant file %s" % variant)

        def st(ms):
            return {"iterations": iterations, "min_ms": ms, "median_ms": ms, "mean_ms": ms, "max_ms": ms,
                    "p10_ms": ms, "p90_ms": ms}
        # The report of kerncap_replay_bench (kerncap_replay_capi.h).
        rep = FakeReplay.bench_report or {
            "variant": st(0.5) if variant else None, "original": st(0.5), "speedup": 1.0 if variant else None,
            "spread": {"pairs": iterations, "median": 1.0, "p10": 0.98, "p90": 1.02, "min": 0.95, "max": 1.05},
            "cold_l2": cold_l2, "validated": {"variant": "pass", "original": "pass"},
            "revalidated": {"variant": "pass", "original": "pass"}, "pass": True}
        return json.loads(json.dumps(rep))

    def close(self):
        FakeReplay.calls.append(("close",))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class FakeReplayError(RuntimeError):
    pass


def apply_effect(effect, info, log):
    """What "the rebuilt kernel" writes when run.py launches it: the post
    image of every written region ("as_captured", the default: a correct
    kernel), at its own scratch pointer for the scratch ("scratch_to":
    "given"), then the effect's corruptions [[va, hex]]."""
    log.append({"global_scratch": info.get("global_scratch"), "grid": info.get("grid")})
    for r in WORLD.regions:
        if r["written"] and effect.get("as_captured", True):
            r["mem"][:] = r["post"]
    sc = effect.get("scratch")
    if sc:  # the kernel writes its descriptors where Triton's launcher put its scratch
        captured, n, data = int(sc["captured"]), int(sc["size"]), bytes.fromhex(sc["hex"])
        r = WORLD.find(captured, n)
        off = captured - r["va"]
        r["mem"][off:off + n] = r["pre"][off:off + n]  # not written by "as_captured"
        given = info.get("global_scratch")
        try:
            WORLD.write(given, data)
        except (RuntimeError, TypeError):
            log[-1]["scratch_outside_world"] = True
    for va, hx in effect.get("corrupt") or []:
        WORLD.write(int(va), bytes.fromhex(hx))


def run(project, argv):
    global WORLD  # pylint: disable=global-statement
    WORLD = World(os.environ["KC_HARNESS_WORLD"])
    effect = {}
    if os.environ.get("KC_HARNESS_EFFECT"):
        with open(os.environ["KC_HARNESS_EFFECT"]) as f:
            effect = json.load(f)
    if effect.get("bench_report"):
        FakeReplay.bench_report = effect["bench_report"]
    FakeReplay.report_override = effect.get("validate_report")
    binding = types.ModuleType("kerncap_replay")
    binding.Replay = FakeReplay
    binding.ReplayError = FakeReplayError
    sys.modules["kerncap_replay"] = binding
    import fake_triton_driver as fd  # pylint: disable=import-outside-toplevel
    drv = fd.activate()
    launch_log = []
    drv.on_launch = lambda info: apply_effect(effect, info, launch_log)
    ns = runpy.run_path(os.path.join(project, "run.py"), run_name="kerncap_run")
    # run_path returns a copy of the module's globals: patch the functions'.
    ns["main"].__globals__["DeviceMemory"] = FakeMemory
    import io  # pylint: disable=import-outside-toplevel
    out = io.StringIO()
    real = sys.stdout
    sys.stdout = out
    try:
        rc = ns["main"](argv)
    finally:
        sys.stdout = real
    text = out.getvalue().strip()
    doc = json.loads(text.splitlines()[-1]) if text else {}
    doc["harness"] = {"rc": rc, "launches": drv.launches, "replay_calls": FakeReplay.calls,
                      "launch_log": launch_log,
                      "sys_modules": {m: getattr(getattr(sys.modules[m], "__spec__", None), "origin", None)
                                      for m in sorted(sys.modules) if m.startswith("kc_app")}}
    print(json.dumps(doc, default=str))
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "capture":
        capture(argv[2], argv[3])
        return 0
    if len(argv) >= 3 and argv[1] == "run":
        return run(argv[2], argv[3:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
