"""Triton kernels the tests compile (a module of its own, so that the
recorded file and line are known). Importing it needs triton."""
import triton
import triton.language as tl

if not hasattr(triton, "knobs"):
    # Triton < 3.4 Autotuners ask the active driver for a benchmarker when
    # they are created: without a GPU that has to be the fake one.
    import fake_triton_driver
    fake_triton_driver.activate()


@triton.jit
def kc_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


ADD_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}

AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK": 256}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK": 512}, num_warps=4, num_stages=4),
]


@triton.autotune(configs=AUTOTUNE_CONFIGS, key=["n"])
@triton.jit
def kc_tuned_scale(x_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * alpha, mask=mask)


@triton.heuristics({"BLOCK": lambda args: 64 if args["n"] < 4096 else 1024})
@triton.jit
def kc_heuristic_copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=2)], key=[])
@triton.jit
def kc_single_config(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


# More candidates than the shim's variant table keeps (16): the winner is
# compiled early and must survive the later compiles (tests pick a timing
# that makes config 2 win).
MANY_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=2)
                for b in (32, 64, 128, 256, 512) for w in (1, 2, 4, 8)]


@triton.autotune(configs=MANY_CONFIGS, key=["n"])
@triton.jit
def kc_many_configs(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)
