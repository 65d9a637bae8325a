"""An autotuned Triton matmul (fp16 in, fp32 accumulate, fp16 out).

Autotuning compiles and benchmarks every candidate config under the same
kernel name; afterwards the capture of a real launch must carry the
metadata of the chosen config, and its code object must be the chosen
variant's binary. Then its reproducer (gpu_case.check_reproducer), also
run with another candidate's block sizes and the grid they need.
"""
import json
import sys

import gpu_case as gc

torch = gc.require_gpu()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def kc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def main():
    st = gc.require_shim()
    print("shim: %s, triton %s, torch %s" % (st["triton_hooks"], triton.__version__, torch.__version__))
    M, N, K = 1024, 768, 512
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((M, K), generator=gen, dtype=torch.float16).cuda()
    b = torch.randn((K, N), generator=gen, dtype=torch.float16).cuda()
    c = torch.empty((M, N), dtype=torch.float16, device="cuda")

    def launch():
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
        kc_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1))

    launch()  # compiles and benchmarks every config, then runs the best
    torch.cuda.synchronize()
    best = kc_matmul_kernel.best_config
    print("autotuner chose: %s" % best)
    ref = (a.float() @ b.float()).half()
    gc.check(torch.allclose(c.float(), ref.float(), atol=0.5, rtol=0.02), "matmul result is wrong")
    st = gc.shim_status()
    gc.check(st["agent"] is not None, "the shim did not find the agent: %s" % st)
    gc.check(st["last_result"].get("kc_matmul_kernel") == 0, "agent did not accept the metadata: %s" % st)

    gc.arm("kc_matmul_kernel")
    cid = gc.launch_until_captured(launch)
    m, doc, v = gc.check_capture(cid, "kc_matmul_kernel", chosen=best, source_file=__file__)
    grid = (m.get("launch") or {}).get("grid")
    want = [triton.cdiv(M, best.kwargs["BLOCK_M"]), triton.cdiv(N, best.kwargs["BLOCK_N"]), 1]
    gc.check(grid == want, "captured grid %s, the chosen config gives %s" % (grid, want))
    at = doc["autotune"]
    gc.check(len(at.get("configs", [])) == len(CONFIGS), "candidate configs: %s" % at.get("configs"))
    gc.check(at.get("key_args") == ["M", "N", "K"], "key args %s" % at.get("key_args"))
    gc.check(len(doc["variants"]) >= len(CONFIGS), "expected a variant per candidate: %d" % len(doc["variants"]))
    gc.check(v.get("target", {}).get("backend") == "cuda", "target %s" % v.get("target"))
    gc.try_validate(cid)
    # The reproducer, also with other block sizes: another candidate whose
    # tiles differ, with the grid those tiles need.
    other = next(c for c in CONFIGS if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) !=
                 (best.kwargs["BLOCK_M"], best.kwargs["BLOCK_N"]))
    cfg = dict(other.kwargs, num_warps=other.num_warps, num_stages=other.num_stages)
    other_grid = "%d,%d,1" % (triton.cdiv(M, other.kwargs["BLOCK_M"]), triton.cdiv(N, other.kwargs["BLOCK_N"]))
    gc.check_reproducer(
        cid, "kc_matmul_kernel", edit=("acc.to(tl.float16)", "(acc + 1.0).to(tl.float16)", "c_ptr"),
        config_runs=[(["--config", json.dumps(cfg), "--grid", other_grid], "config %s grid %s" % (cfg, other_grid))],
        tolerance=("--rtol", "1e-2", "--atol", "0.05"), bench=50)
    print("PASS: triton_matmul_autotune (chosen %s, %d candidates)" % (gc.config_of(best), len(CONFIGS)))


if __name__ == "__main__":
    main()
    sys.exit(0)
