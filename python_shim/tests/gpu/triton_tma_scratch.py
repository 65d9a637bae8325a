"""Device-side TMA descriptors (tl.make_tensor_descriptor): Triton writes
them into its global scratch, which the application's allocator
(triton.set_allocator -> torch) takes from PyTorch's caching allocator, in
the same segment as the kernel's small tensors. The reproducer must hand
Triton the captured scratch (else the captured scratch stays stale and the
segment fails), and an edit that breaks one output must fail that output
alone, not the segment its neighbours share.
"""
import sys

import gpu_case as gc

torch = gc.require_gpu()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def kc_tma_scale(src_ptr, dst_ptr, aux_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    s = tl.make_tensor_descriptor(src_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    d = tl.make_tensor_descriptor(dst_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = s.load([pid_m * BM, pid_n * BN])
    d.store([pid_m * BM, pid_n * BN], x * 2.0)
    # A second output next to the others in the segment.
    offs = (pid_m * tl.num_programs(1) + pid_n) * 16 + tl.arange(0, 16)
    tl.store(aux_ptr + offs, offs.to(tl.float32))


def main():
    gc.require_shim()
    if torch.cuda.get_device_capability()[0] < 9:
        gc.skip("device-side TMA descriptors need sm_90 or later")
    M = N = 128
    BM = BN = 64
    # Small tensors: the caching allocator carves them out of one segment.
    src = torch.randn((M, N), device="cuda")
    dst = torch.zeros((M, N), device="cuda")
    aux = torch.zeros((M // BM) * (N // BN) * 16, device="cuda")
    scratch_ptrs = []

    def alloc(size, alignment, stream):
        buf = torch.empty(size, dtype=torch.int8, device="cuda")
        scratch_ptrs.append(buf.data_ptr())
        return buf

    triton.set_allocator(alloc)
    grid = (M // BM, N // BN)

    def launch():
        kc_tma_scale[grid](src, dst, aux, M, N, BM=BM, BN=BN)

    launch()
    torch.cuda.synchronize()
    gc.check(torch.allclose(dst, src * 2.0), "wrong result")
    gc.check(scratch_ptrs, "the kernel asked for no global scratch: no device-side TMA descriptors here")
    gc.arm("kc_tma_scale")
    cid = gc.launch_until_captured(launch)
    m, doc, v = gc.check_capture(cid, "kc_tma_scale", source_file=__file__)
    gc.check((v.get("options") or {}).get("global_scratch_size", 0) > 0,
             "the variant records no global scratch: %s" % v.get("options"))
    regions = {}
    for i, a in enumerate(m.get("arguments") or []):
        reg = ((a.get("pointer") or {}).get("region") or {}) if isinstance(a, dict) else {}
        if reg:
            regions.setdefault(reg.get("index"), []).append(i)
    print("[ info ] kernel parameters per captured region: %s" % regions)
    repro = gc.check_reproducer(cid, "kc_tma_scale", edit=("x * 2.0", "x * 2.5", "dst_ptr"),
                                failing_exactly=["dst_ptr"], keep=True)
    try:
        t = repro.project["triton"]
        sc = (t.get("scratch") or {}).get("global") or {}
        gc.check(sc.get("captured") not in (None, "0x0") and sc.get("size_per_program", 0) > 0,
                 "kerncap.json records no captured scratch: %s" % t.get("scratch"))
        doc = repro.run()
        rows = {r["buffer"]: r for r in (doc.get("validation") or {}).get("buffers") or []}
        print("[ repro ] buffers: %s" % {k: (r.get("region"), r.get("result"), r.get("extent_basis"))
                                         for k, r in rows.items()})
        shared = [k for k, r in rows.items() if r.get("region") == rows.get("dst_ptr", {}).get("region")]
        print("[ info ] sharing dst_ptr's region: %s" % shared)
    finally:
        repro.cleanup()
    print("PASS: triton_tma_scratch")


if __name__ == "__main__":
    main()
    sys.exit(0)
