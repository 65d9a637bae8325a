"""triton_add: a Triton kernel, out = x + y with a masked tail (float32).

Run by tests/gpu/gpu_e2e_test.cc under the agent (CUDA_INJECTION64_PATH) with
kerncapd armed on "kc_triton_add" (Triton names the cubin's kernel after the
Python function; it loads it with cuModuleLoadData and launches it with
cuLaunchKernelEx). Inputs are copied from the host, so this kernel is the only
one launched. Exits 77 (skip) without torch, triton or a CUDA device.
"""
import sys

SKIP = 77

try:
    import torch
    import triton
    import triton.language as tl
except Exception as e:  # pylint: disable=broad-except
    print(f"SKIP: triton_add: cannot import torch/triton ({e})")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print(f"SKIP: triton_add: torch {torch.__version__} sees no CUDA device")
    sys.exit(SKIP)


@triton.jit
def kc_triton_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


n = 98432 + 77  # not a multiple of BLOCK: the last program is masked
x_host = torch.arange(n, dtype=torch.float32) * 0.75
y_host = 3.0 - torch.arange(n, dtype=torch.float32) * 0.5
x = x_host.cuda()
y = y_host.cuda()
out = torch.empty_like(x)
grid = (triton.cdiv(n, 1024),)
kc_triton_add[grid](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
expect = x_host + y_host
if not torch.equal(out.cpu(), expect):
    bad = (out.cpu() != expect).nonzero()[:5].flatten().tolist()
    print(f"FAIL: triton_add: mismatch at {bad}")
    sys.exit(1)
print(f"triton_add: triton {triton.__version__}, torch {torch.__version__} n={n} "
      f"x=0x{x.data_ptr():x} y=0x{y.data_ptr():x} out=0x{out.data_ptr():x} OK")
