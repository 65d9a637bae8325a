"""torch_graphs: kernels inside the CUDA graphs of torch.compile(mode="reduce-overhead").

Run by tests/gpu/gpu_e2e_test.cc under the agent (CUDA_INJECTION64_PATH). A
small MLP is compiled with mode="reduce-overhead": Inductor generates Triton
kernels for the pointwise parts and calls cuBLAS for the matmuls, and its
CUDA-graph trees record the whole step once and replay it with
cudaGraphLaunch afterwards. After warm-up (compilation and recording) the
script arms kerncapd itself ($KERNCAP_TEST_CTL: kerncapctl and its --socket
flag) for one Inductor Triton kernel and one cuBLAS GEMM, then runs three more
steps: every kernel of those steps runs inside a graph replay, so both
captures come from graph nodes (the e2e test checks that `kerncapctl show`
names the graph, then validates both). Every step's output is compared with
the eager model. Exits 77 (skip) without torch, triton or a CUDA device.
"""
import os
import shlex
import subprocess
import sys
import time

SKIP = 77

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # pylint: disable=broad-except
    print(f"SKIP: torch_graphs: cannot import torch ({e})")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print(f"SKIP: torch_graphs: torch {torch.__version__} sees no CUDA device")
    sys.exit(SKIP)
try:
    import triton  # noqa: F401  (Inductor's GPU backend)
except Exception as e:  # pylint: disable=broad-except
    print(f"SKIP: torch_graphs: cannot import triton ({e})")
    sys.exit(SKIP)

CTL = shlex.split(os.environ.get("KERNCAP_TEST_CTL", ""))


def arm(*args):
    if not CTL:
        print("torch_graphs: no $KERNCAP_TEST_CTL: not arming")
        return
    r = subprocess.run(CTL + ["arm", *args], capture_output=True, text=True, timeout=60)
    print(f"torch_graphs: arm {' '.join(args)} -> {r.returncode} {r.stdout.strip()} {r.stderr.strip()}")
    if r.returncode != 0:
        sys.exit(1)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 1024)
        self.fc2 = torch.nn.Linear(1024, 256)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        return self.fc2(h) * 0.5 + torch.sin(x)


torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
model = Mlp().cuda().eval()
compiled = torch.compile(model, mode="reduce-overhead")
x = torch.randn(64, 256, device="cuda")


def step(k):
    with torch.no_grad():
        out = compiled(x).clone()
        ref = model(x)
    torch.cuda.synchronize()
    if not torch.allclose(out, ref, rtol=1e-4, atol=1e-4):
        err = (out - ref).abs().max().item()
        print(f"FAIL: torch_graphs: step {k}: compiled output differs from eager by {err}")
        sys.exit(1)


for k in range(5):  # compile, warm up, record the CUDA graph, replay
    step(k)
arm("--kernel=triton_", "--count=1")
arm("--kernel=gemm|Gemm|nvjet|xmma|cutlass", "--match=regex", "--count=1")
time.sleep(1.0)  # the arms reach the agent
for k in range(5, 8):
    step(k)
try:
    from torch._dynamo.utils import counters
    skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
except Exception:  # pylint: disable=broad-except
    skips = "?"
print(f"torch_graphs: torch {torch.__version__} on {torch.cuda.get_device_name()}: 8 steps of a "
      f"reduce-overhead compiled MLP (cudagraph skips: {skips}) x=0x{x.data_ptr():x} OK")
