"""An autotuner with 20 candidates, more than the shim's variant table
keeps (16): the winner, made the third candidate by a scripted benchmark
(do_bench returns a fixed ranking; compiling and launching are real), is
compiled long before the last candidate. The capture's code object must be
the winner's binary, the reproducer must be generated from it (by its
digest) and rebuild it, and --bench must time it at about 1.0x.
"""
import sys

import gpu_case as gc

torch = gc.require_gpu()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=2)
           for b in (128, 256, 512, 1024, 2048) for w in (1, 2, 4, 8)]
WINNER = 2  # BLOCK=128, num_warps=4
CALLS = []


def scripted_bench(kernel_call, quantiles=None, **_):
    """Runs the candidate (compiles it, launches it) and ranks by order."""
    kernel_call()
    torch.cuda.synchronize()
    i = len(CALLS)
    CALLS.append(i)
    t = 0.5 if i == WINNER else 1.0 + 0.01 * i
    return [t, t, t] if quantiles else t


@triton.autotune(configs=CONFIGS, key=["n"], do_bench=scripted_bench)
@triton.jit
def kc_many_configs(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def main():
    st = gc.require_shim()
    print("shim: %s, triton %s" % (st["triton_hooks"], triton.__version__))
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def launch():
        kc_many_configs[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)

    launch()
    torch.cuda.synchronize()
    best = kc_many_configs.best_config
    gc.check(best is CONFIGS[WINNER], "the scripted benchmark did not pick candidate %d: %s" % (WINNER, best))
    # Triton fuses x * 3 + 1 into one FMA (one rounding), torch rounds twice:
    # near the root of 3x + 1 the relative difference is large, so compare
    # with an absolute tolerance of a few float32 ulps of the operands.
    want = x * 3.0 + 1.0
    if not torch.allclose(y, want, rtol=1e-5, atol=1e-6):
        bad = (~torch.isclose(y, want, rtol=1e-5, atol=1e-6)).nonzero().flatten()
        i = int(bad[0])
        gc.check(False, "wrong result: %d of %d elements differ, first at %d: %r for x=%r (want %r); "
                 "the candidates ran in this order: %s" % (
                     bad.numel(), n, i, float(y[i]), float(x[i]), float(want[i]), CALLS))
    gc.arm("kc_many_configs")
    cid = gc.launch_until_captured(launch)
    _, doc, v = gc.check_capture(cid, "kc_many_configs", chosen=best, source_file=__file__)
    gc.check(doc.get("evicted_variants", 0) >= len(CONFIGS) - 16,
             "the shim evicted %s variant(s); expected >= %d" % (doc.get("evicted_variants"), len(CONFIGS) - 16))
    gc.check(v["id"] in (doc.get("pinned") or []), "the chosen variant is not pinned: %s" % doc.get("pinned"))
    gc.check((v.get("config_index")) == WINNER, "the captured variant is candidate %s" % v.get("config_index"))
    gc.check_reproducer(cid, "kc_many_configs", edit=("* 3.0 + 1.0", "* 3.0 + 2.0", "y_ptr"), bench=50)
    print("PASS: triton_many_configs (winner candidate %d of %d, %d variants evicted)" % (
        WINNER, len(CONFIGS), doc.get("evicted_variants", 0)))


if __name__ == "__main__":
    main()
    sys.exit(0)
