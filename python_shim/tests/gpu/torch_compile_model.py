"""A small torch.compile'd model: Inductor generates Triton kernels, compiles
them (usually in worker processes) and launches them from this process,
possibly through torch's static CUDA launcher. The shim records them from
Inductor's CachingAutotuner. After a warm-up, one recorded kernel (one with
several candidate configs if any) is armed and captured; the capture's
metadata must name the launched binary, the file Inductor wrote, and the
candidate and chosen configs. Then its reproducer
(gpu_case.check_reproducer)."""
import os
import sys

import gpu_case as gc

torch = gc.require_gpu()


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = torch.nn.Linear(d, 4 * d)
        self.proj = torch.nn.Linear(4 * d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc(x))
        return self.norm(x + self.proj(h) * torch.sigmoid(x))


def main():
    gc.require_shim()
    import kerncap_shim
    torch.manual_seed(0)
    model = Block(256).cuda()
    x = torch.randn(64, 128, 256, device="cuda")
    compiled = torch.compile(model)
    with torch.no_grad():
        out = compiled(x)
        ref = model(x)
    torch.cuda.synchronize()
    gc.check(torch.allclose(out, ref, atol=2e-3, rtol=2e-3), "compiled model disagrees with eager")
    st = gc.shim_status()
    print("shim status: hooks=%s inductor=%s agent=%s kernels=%s stats=%s errors=%s" % (
        st["triton_hooks"], st["inductor_hooks"], st["agent"], st["kernels"], st["stats"], st["errors"]))
    gc.check(st["inductor_hooks"], "Inductor's CachingAutotuner was not hooked")
    names = [n for n in kerncap_shim.kernels() if n.startswith("triton_")]
    gc.check(names, "no Inductor kernel recorded: %s" % st)
    docs = {n: kerncap_shim.document(n) for n in names}
    # Prefer a kernel Inductor had to choose a config for.
    names.sort(key=lambda n: -len(((docs[n] or {}).get("autotune") or {}).get("configs") or []))
    name = names[0]
    doc = docs[name]
    print("arming %s: %d candidate config(s), inductor file %s" % (
        name, len((doc.get("autotune") or {}).get("configs") or []), (doc.get("inductor") or {}).get("file")))

    def launch():
        with torch.no_grad():
            compiled(x)

    gc.arm(name, match="glob")
    cid = gc.launch_until_captured(launch)
    _, doc, v = gc.check_capture(cid, name)
    ind = doc.get("inductor") or {}
    gc.check(ind.get("kernel_name") == name, "inductor kernel_name %r" % ind.get("kernel_name"))
    gc.check(ind.get("file") and os.path.exists(ind["file"]), "Inductor's file %r" % ind.get("file"))
    fn = doc["functions"][v["function"]]
    gc.check("def %s(" % name in fn.get("source", ""), "source does not define %s" % name)
    at = doc.get("autotune") or {}
    gc.check(at.get("kind") == "inductor.CachingAutotuner" and at.get("configs"), "autotune %s" % at)
    gc.check(at.get("chosen") is not None, "no chosen config recorded: %s" % at)
    gc.check(v.get("config") is not None and gc.config_of(v["config"]) == gc.config_of(at["chosen"]),
             "current variant's config %s, chosen %s" % (v.get("config"), at.get("chosen")))
    # The reproducer of Inductor's kernel (kernel.py keeps Inductor's runtime
    # imports; the edit changes its first store).
    gc.check_reproducer(cid, name, tolerance=("--rtol", "1e-3", "--atol", "1e-4"))
    print("PASS: torch_compile_model (%s via %s, %d configs)" % (name, v.get("via"), len(at["configs"])))


if __name__ == "__main__":
    main()
    sys.exit(0)
