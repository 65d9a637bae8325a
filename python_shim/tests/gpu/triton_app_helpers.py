"""A kernel in an application package that imports its helpers from the
package's other modules (absolute, relative and module-alias imports, a
constexpr, a constexpr function), and whose __init__ imports something only
the application has. The reproducer must copy what the kernel uses into
deps/ and run where the package is not (it is moved away before run.py).
"""
import os
import shutil
import sys
import tempfile

import gpu_case as gc

torch = gc.require_gpu()
import triton  # noqa: E402,F401

FILES = {
    "kc_gpu_app/__init__.py": "import kc_gpu_app_only_dependency  # noqa: F401 (the application's own)\n",
    "kc_gpu_app/consts.py": "import triton.language as tl\n\nOFFSET = tl.constexpr(0.5)\nUNUSED = tl.constexpr(3)\n",
    "kc_gpu_app/ops/__init__.py": "",
    "kc_gpu_app/ops/utils.py": '''import triton
import triton.language as tl

from ..consts import OFFSET

SCALE = tl.constexpr(3.0)


@triton.constexpr_function
def half(b):
    return b // 2


@triton.jit
def scale_helper(x):
    return x * SCALE + OFFSET


@triton.jit
def clamp_helper(x, lo):
    return tl.maximum(x, lo)
''',
    "kc_gpu_app/ops/kernels.py": '''import triton
import triton.language as tl

import kc_gpu_app.ops.utils as U
from kc_gpu_app.ops.utils import scale_helper, half
from ..consts import OFFSET


@triton.jit
def kc_app_helpers(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = U.clamp_helper(scale_helper(x), OFFSET)
    tl.store(y_ptr + offs, y, mask=mask & (offs % BLOCK < half(BLOCK) * 2))
''',
}


def main():
    gc.require_shim()
    root = tempfile.mkdtemp(prefix="kc_gpu_app_")
    for rel, text in FILES.items():
        path = os.path.join(root, "src", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    os.makedirs(os.path.join(root, "site"))
    with open(os.path.join(root, "site", "kc_gpu_app_only_dependency.py"), "w") as f:
        f.write("")
    sys.path[:0] = [os.path.join(root, "src"), os.path.join(root, "site")]
    from kc_gpu_app.ops import kernels  # noqa: E402
    n = (1 << 16) + 3
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def launch():
        kernels.kc_app_helpers[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)

    launch()
    torch.cuda.synchronize()
    gc.check(torch.allclose(y, torch.clamp(x * 3.0 + 0.5, min=0.5)), "wrong result")
    gc.arm("kc_app_helpers")
    cid = gc.launch_until_captured(launch)
    gc.check_capture(cid, "kc_app_helpers", source_file=os.path.join(root, "src", "kc_gpu_app", "ops", "kernels.py"))
    if not gc.repro_enabled():
        return
    # Generated here, where the package is; run where it is not.
    repro = gc.Repro(cid, "kc_app_helpers")
    shutil.move(root, root + ".gone")
    try:
        gc.check_reproducer(cid, "kc_app_helpers", edit=("scale_helper(x), OFFSET", "scale_helper(x), 0.0", "y_ptr"),
                            bench=50, keep=True, repro=repro)
        try:
            ks = repro.project["triton"]["kernel_source"]
            mods = sorted(m["module"] for m in ks.get("modules") or [])
            gc.check(mods == ["kc_gpu_app.consts", "kc_gpu_app.ops.utils"], "copied modules %s" % mods)
            gc.check(not ks.get("not_copied"), "not copied: %s" % ks.get("not_copied"))
            utils = open(os.path.join(repro.dir, "deps", "kc_gpu_app", "ops", "utils.py")).read()
            gc.check("def clamp_helper" in utils and "def half" in utils, "deps utils.py:\n%s" % utils)
        finally:
            repro.cleanup()
    finally:
        shutil.rmtree(root + ".gone", ignore_errors=True)
    print("PASS: triton_app_helpers")


if __name__ == "__main__":
    main()
    sys.exit(0)
