"""torch_cuda_graph_decode: a decode loop over torch.cuda.CUDAGraph, one graph per batch size.

Run by tests/gpu/gpu_e2e_test.cc under the agent (CUDA_INJECTION64_PATH). Like
a serving engine, the script records one CUDA graph per batch size (1, 2, 4,
8) over static buffers sized for the largest batch (a matmul, tanh, an add),
then runs a decode loop that copies each step's input into the static buffer
and replays the graph of the step's batch size. After two steps it arms
kerncapd itself ($KERNCAP_TEST_CTL) for the tanh kernel, so the capture is
the tanh node of a graph replay (the e2e test checks `kerncapctl show` names
the graph and validates it). Every step's output is compared with eager
PyTorch. Exits 77 (skip) without torch or a CUDA device.
"""
import os
import shlex
import subprocess
import sys
import time

SKIP = 77

try:
    import torch
except Exception as e:  # pylint: disable=broad-except
    print(f"SKIP: torch_cuda_graph_decode: cannot import torch ({e})")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print(f"SKIP: torch_cuda_graph_decode: torch {torch.__version__} sees no CUDA device")
    sys.exit(SKIP)

CTL = shlex.split(os.environ.get("KERNCAP_TEST_CTL", ""))
MAX_BATCH, HIDDEN = 8, 1024
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
w = torch.randn(HIDDEN, HIDDEN, device="cuda") / HIDDEN ** 0.5
bias = torch.randn(HIDDEN, device="cuda")
static_in = torch.zeros(MAX_BATCH, HIDDEN, device="cuda")
graphs, outs = {}, {}


def body(bs):
    return torch.tanh(static_in[:bs] @ w) + bias


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for bs in (1, 2, 4, 8):
        body(bs)  # warm-up outside capture (cuBLAS handles, workspaces)
torch.cuda.current_stream().wait_stream(side)
for bs in (1, 2, 4, 8):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs[bs] = body(bs)
    graphs[bs] = g

schedule = [1, 2, 4, 8, 8, 4, 2, 1, 2, 8]
for k, bs in enumerate(schedule):
    if k == 2 and CTL:
        r = subprocess.run(CTL + ["arm", "--kernel=tanh", "--count=1"], capture_output=True,
                           text=True, timeout=60)
        print(f"torch_cuda_graph_decode: arm -> {r.returncode} {r.stdout.strip()} {r.stderr.strip()}")
        if r.returncode != 0:
            sys.exit(1)
        time.sleep(1.0)  # the arm reaches the agent
    new = torch.randn(bs, HIDDEN, device="cuda")
    static_in[:bs].copy_(new)
    graphs[bs].replay()
    torch.cuda.synchronize()
    ref = torch.tanh(new @ w) + bias
    if not torch.allclose(outs[bs], ref, rtol=1e-4, atol=1e-4):
        err = (outs[bs] - ref).abs().max().item()
        print(f"FAIL: torch_cuda_graph_decode: step {k} (batch {bs}) differs from eager by {err}")
        sys.exit(1)
print(f"torch_cuda_graph_decode: torch {torch.__version__}: {len(schedule)} decode steps over 4 "
      f"CUDA graphs (batch 1/2/4/8), static_in=0x{static_in.data_ptr():x} OK")
