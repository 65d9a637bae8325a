"""An in-place Triton kernel (x = x * alpha + y) with a heuristics-chosen
block size and no autotuner: the capture's metadata must name the binary
that ran and carry its constexprs, signature and specialisation. Then its
reproducer (gpu_case.check_reproducer)."""
import sys

import gpu_case as gc

torch = gc.require_gpu()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.heuristics({"BLOCK": lambda args: 1024 if args["n"] >= 1 << 16 else 256})
@triton.jit
def kc_inplace_axpy(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * alpha + y, mask=mask)


def main():
    gc.require_shim()
    n = (1 << 20) + 13
    x = torch.arange(n, dtype=torch.float32, device="cuda") * 0.5
    y = torch.full((n,), 2.0, dtype=torch.float32, device="cuda")
    expect = x.clone()

    def launch():
        kc_inplace_axpy[(triton.cdiv(n, 1024),)](x, y, n, 0.75)
        expect.mul_(0.75).add_(y)

    launch()
    torch.cuda.synchronize()
    gc.check(torch.allclose(x, expect), "in-place result is wrong")
    gc.arm("kc_inplace_axpy")
    cid = gc.launch_until_captured(launch)
    gc.check(torch.allclose(x, expect, rtol=1e-4), "in-place result is wrong after capture")
    _, doc, v = gc.check_capture(cid, "kc_inplace_axpy", source_file=__file__)
    gc.check(v.get("constexprs") == {"BLOCK": 1024}, "constexprs %s" % v.get("constexprs"))
    sig = v.get("signature") or {}
    gc.check(sig.get("x_ptr") == "*fp32" and sig.get("alpha") == "fp32" and sig.get("n") == "i32",
             "signature %s" % sig)
    gc.check("x_ptr" in (v.get("specialization") or {}), "specialisation %s" % v.get("specialization"))
    gc.check(v.get("target", {}).get("name", "").startswith("sm_"), "target %s" % v.get("target"))
    gc.check("autotune" not in doc, "no autotuner here, yet: %s" % doc.get("autotune"))
    gc.try_validate(cid)
    # The reproducer: kernel.py with the heuristics decorator removed, BLOCK
    # pinned to the captured 1024.
    gc.check_reproducer(cid, "kc_inplace_axpy", edit=("x * alpha + y", "x * alpha + y + 1.0", "x_ptr"), bench=50)
    print("PASS: triton_inplace")


if __name__ == "__main__":
    main()
    sys.exit(0)
