"""torch.compile from warm caches: a first process (no agent, no shim: a
plain earlier run of the application) compiles the model and fills
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR; this process compiles the same
model again, which Inductor serves from its FX graph cache (kernels come
back pickled, cubins from the Triton cache; nothing is compiled here). The
shim must still record Inductor's kernels with their binaries' digests, and
the capture must make a working reproducer.
"""
import os
import subprocess
import sys

import gpu_case as gc

torch = gc.require_gpu()

from torch_compile_model import Block  # noqa: E402


def compile_and_run():
    torch.manual_seed(0)
    model = Block(256).cuda()
    x = torch.randn(64, 128, 256, device="cuda")
    compiled = torch.compile(model)
    with torch.no_grad():
        out = compiled(x)
    torch.cuda.synchronize()
    return model, compiled, x, out


def populate():
    compile_and_run()
    print("populated the caches")


def main():
    gc.require_shim()
    import kerncap_shim
    env = dict(os.environ)
    for k in ("CUDA_INJECTION64_PATH", "KERNCAP_TRITON_SHIM", "KERNCAP_AGENT_SOCKET"):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and not p.rstrip("/").endswith(os.path.join("kerncap_shim", "_site")))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--populate"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=240, check=False)
    gc.check(r.returncode == 0, "the first (cache-filling) run failed:\n%s" % r.stdout.decode(errors="replace")[-3000:])
    from torch._dynamo.utils import counters
    counters.clear()
    model, compiled, x, out = compile_and_run()
    with torch.no_grad():
        ref = model(x)
    gc.check(torch.allclose(out, ref, atol=2e-3, rtol=2e-3), "compiled model disagrees with eager")
    hits = dict(counters["inductor"])
    print("[ info ] inductor counters: %s" % {k: v for k, v in hits.items() if "cache" in k or "triton" in k})
    gc.check(hits.get("fxgraph_cache_hit", 0) > 0, "the second compile did not hit the FX graph cache (%s): the warm "
             "path was not exercised" % hits)
    st = gc.shim_status()
    print("shim status: kernels=%s stats=%s errors=%s" % (st["kernels"], st["stats"], st["errors"]))
    names = [n for n in kerncap_shim.kernels() if n.startswith("triton_")]
    gc.check(names, "no Inductor kernel recorded from the warm caches: %s" % st)
    docs = {n: kerncap_shim.document(n) for n in names}
    no_digest = [n for n, d in docs.items() if not any((v.get("binary") or {}).get("sha256")
                                                        for v in (d or {}).get("variants", []))]
    gc.check(not no_digest, "recorded without a binary digest: %s" % no_digest)
    name = sorted(names)[0]

    def launch():
        with torch.no_grad():
            compiled(x)

    gc.arm(name, match="glob")
    cid = gc.launch_until_captured(launch)
    _, doc, v = gc.check_capture(cid, name)
    gc.check((doc.get("inductor") or {}).get("kernel_name") == name, "inductor %s" % doc.get("inductor"))
    gc.check_reproducer(cid, name, tolerance=("--rtol", "1e-3", "--atol", "1e-4"), bench=50)
    print("PASS: torch_compile_warm (%s via %s; %d kernels recorded from the warm caches)" % (
        name, v.get("via"), len(names)))


if __name__ == "__main__":
    if "--populate" in sys.argv:
        populate()
    else:
        main()
    sys.exit(0)
