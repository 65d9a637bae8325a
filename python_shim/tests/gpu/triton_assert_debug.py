"""Device asserts with TRITON_DEBUG=1 and torch's ptxas (TRITON_PTXAS_PATH,
as Inductor sets it): the binary embeds this file's name and the asserts'
line numbers, and ptxas's version enters the code. run.py runs without
either variable (gpu_case.repro_env drops them) and must still rebuild the
captured binary, from kerncap.json's record of them.
"""
import os
import sys

os.environ["TRITON_DEBUG"] = "1"  # before triton is imported: knobs.runtime.debug

import gpu_case as gc  # noqa: E402

torch = gc.require_gpu()
_TORCH_PTXAS = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
if os.path.isfile(_TORCH_PTXAS) and "TRITON_PTXAS_PATH" not in os.environ:
    os.environ["TRITON_PTXAS_PATH"] = _TORCH_PTXAS
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _checked(x):
    tl.device_assert(x == x, "NaN input")
    return x


@triton.jit
def kc_assert_axpy(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = _checked(tl.load(x_ptr + offs, mask=mask))
    tl.device_assert(offs < n + BLOCK, "offset out of range")
    tl.store(y_ptr + offs, x * alpha + 1.0, mask=mask)


def main():
    gc.require_shim()
    n = (1 << 18) + 5
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def launch():
        kc_assert_axpy[(triton.cdiv(n, 512),)](x, y, n, 0.5, BLOCK=512)

    launch()
    torch.cuda.synchronize()
    gc.check(torch.allclose(y, x * 0.5 + 1.0), "wrong result")
    gc.arm("kc_assert_axpy")
    cid = gc.launch_until_captured(launch)
    _, doc, v = gc.check_capture(cid, "kc_assert_axpy", source_file=__file__)
    gc.check((v.get("options") or {}).get("debug") is True, "the variant was not compiled with debug: %s"
             % v.get("options"))
    build = v.get("build") or {}
    print("[ info ] recorded build: %s" % build)
    gc.check((build.get("ptxas") or {}).get("path") == triton.knobs.nvidia.ptxas.path,
             "recorded ptxas %s, Triton used %s" % (build.get("ptxas"), triton.knobs.nvidia.ptxas.path))
    repro = gc.check_reproducer(cid, "kc_assert_axpy", edit=("x * alpha + 1.0", "x * alpha + 2.0", "y_ptr"),
                                bench=50, keep=True)
    try:
        doc = repro.run()
        gc.check((doc.get("binary") or {}).get("identical"), "not byte for byte: %s; notes %s" % (
            doc.get("binary"), doc.get("notes")))
        gc.check(((doc.get("build") or {}).get("ptxas") or {}).get("path") == build["ptxas"]["path"],
                 "run.py used ptxas %s" % (doc.get("build") or {}).get("ptxas"))
    finally:
        repro.cleanup()
    print("PASS: triton_assert_debug (ptxas %s)" % build.get("ptxas"))


if __name__ == "__main__":
    main()
    sys.exit(0)
