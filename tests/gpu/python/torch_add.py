"""torch_add: one PyTorch eager op on the GPU, c = a + b (float32).

Run by tests/gpu/gpu_e2e_test.cc under the agent (CUDA_INJECTION64_PATH) with
kerncapd armed on the elementwise add kernel ("add" in its demangled name, e.g.
at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
...>). The inputs are built on the host and copied, so the add is the only
kernel this script launches. Exits 77 (skip) without torch or a CUDA device.
"""
import sys

SKIP = 77

try:
    import torch
except Exception as e:  # pylint: disable=broad-except
    print(f"SKIP: torch_add: cannot import torch ({e})")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print(f"SKIP: torch_add: torch {torch.__version__} sees no CUDA device")
    sys.exit(SKIP)

n = (1 << 20) + 3
a_host = torch.arange(n, dtype=torch.float32) * 0.5
b_host = 2.0 - torch.arange(n, dtype=torch.float32) * 0.25
a = a_host.cuda()
b = b_host.cuda()
c = a + b
torch.cuda.synchronize()
expect = a_host + b_host
if not torch.equal(c.cpu(), expect):
    bad = (c.cpu() != expect).nonzero()[:5].flatten().tolist()
    print(f"FAIL: torch_add: mismatch at {bad}")
    sys.exit(1)
print(f"torch_add: torch {torch.__version__} on {torch.cuda.get_device_name()} n={n} "
      f"a=0x{a.data_ptr():x} b=0x{b.data_ptr():x} c=0x{c.data_ptr():x} OK")
