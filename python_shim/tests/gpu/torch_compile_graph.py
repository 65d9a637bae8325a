"""torch.compile(mode="reduce-overhead"): Inductor's Triton kernels run from a
CUDA graph that PyTorch records and replays (cudagraph trees). After the
warm-up replays, one recorded Inductor kernel is armed and captured from
inside the graph launch (the agent runs the graph node by node); the
capture must name the graph it came from, carry the shim's metadata for the
launched binary, and its Triton reproducer must rebuild that binary and
validate (gpu_case.check_reproducer)."""
import sys

import gpu_case as gc

torch = gc.require_gpu()


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = torch.nn.Linear(d, 2 * d)
        self.proj = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.proj(torch.nn.functional.silu(self.fc(x))) * torch.sigmoid(x)


def main():
    gc.require_shim()
    import kerncap_shim
    torch.manual_seed(0)
    model = Block(256).cuda()
    x = torch.randn(32, 256, device="cuda")
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):  # warm-up, then recorded, then replayed as a graph
            out = compiled(x)
        ref = model(x)
    torch.cuda.synchronize()
    gc.check(torch.allclose(out, ref, atol=2e-3, rtol=2e-3), "compiled model disagrees with eager")
    names = [n for n in kerncap_shim.kernels() if n.startswith("triton_")]
    gc.check(names, "no Inductor kernel recorded: %s" % gc.shim_status())
    name = sorted(names)[0]
    print("arming %s (kernels: %s)" % (name, names))

    def launch():
        with torch.no_grad():
            compiled(x)

    gc.arm(name, match="glob")
    cid = gc.launch_until_captured(launch)
    rc, show, err = gc.ctl("show", cid)
    gc.check(rc == 0 and "of exec" in show,
             "the capture does not say it came from a CUDA graph:\n%s%s" % (show, err))
    gc.check_capture(cid, name)
    gc.check_reproducer(cid, name, tolerance=("--rtol", "1e-3", "--atol", "1e-4"))
    print("PASS: torch_compile_graph (%s captured from a CUDA graph launch)" % name)


if __name__ == "__main__":
    main()
    sys.exit(0)
