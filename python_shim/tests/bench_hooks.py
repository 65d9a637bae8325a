"""Micro-benchmark: what the shim costs, in pure Python timing.

    python bench_hooks.py [--launches N] [--rounds R] [--json]

1. Launch path (the figure that matters): N launches of a plain JIT kernel
   and of an autotuned one through Triton's real launch code, against a fake
   driver (no GPU: the launch itself is a no-op, so every nanosecond
   measured is Python overhead), without the shim and with it installed and
   an agent present. Rounds alternate without/with; medians are reported.
2. Compile-time hook paths, per call: the compilation listener with an agent
   (records, encodes, hands over) and without one (the early return).
3. Interpreter start-up with KERNCAP_TRITON_SHIM=1 vs unset (only when the
   package's .pth file is installed for this interpreter).

Needs triton; no GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import kerncap_shim  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="kc_shim_bench_cache_"))


def per_call_ns(fn, n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def shim_calls_during(fn, n):
    """Python-level calls into kerncap_shim while running fn() n times,
    counted with sys.setprofile: exact, unlike timing on a busy machine."""
    import kerncap_shim  # pylint: disable=import-outside-toplevel
    pkg = os.path.dirname(os.path.abspath(kerncap_shim.__file__))
    count = [0]

    def prof(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.startswith(pkg):
            count[0] += 1

    sys.setprofile(prof)
    try:
        for _ in range(n):
            fn()
    finally:
        sys.setprofile(None)
    return count[0]


def bench_launch(n, rounds):
    import triton  # pylint: disable=import-outside-toplevel
    from kerncap_shim._state import SHIM  # pylint: disable=import-outside-toplevel
    import fake_triton_driver as fd  # pylint: disable=import-outside-toplevel
    import shim_test_kernels as k  # pylint: disable=import-outside-toplevel
    fd.activate()
    x, y, o = (fd.FakeTensor(0x7f0000000000 + i * 0x100000) for i in range(3))

    def plain():
        k.kc_add_kernel[(64,)](x, y, o, 4096, BLOCK=256)

    def tuned():
        k.kc_tuned_scale[(64,)](x, 4096, 2.0)

    sent = []
    results = {}
    for label, fn in (("jit_launch", plain), ("autotuned_launch", tuned)):
        without, with_ = [], []

        def measure_without():
            SHIM.uninstall()
            fn()  # compiled (and tuned) already after the first round
            without.append(per_call_ns(fn, n))

        def measure_with():
            SHIM.install(agent=lambda name, data: sent.append(name) or 0)
            fn()
            with_.append(per_call_ns(fn, n))

        for r in range(rounds):
            # Alternate the order so drift (frequency, other tenants) does
            # not land on one side.
            for step in ((measure_without, measure_with) if r % 2 == 0 else (measure_with, measure_without)):
                step()
        SHIM.install(agent=lambda name, data: sent.append(name) or 0)
        fn()
        calls = shim_calls_during(fn, 1000)
        SHIM.uninstall()
        a, b = statistics.median(without), statistics.median(with_)
        results[label] = {"without_ns": round(a, 1), "with_ns": round(b, 1), "overhead_ns": round(b - a, 1),
                          "overhead_pct": round(100.0 * (b - a) / a, 2),
                          "min_without_ns": round(min(without), 1), "min_with_ns": round(min(with_), 1),
                          "min_overhead_ns": round(min(with_) - min(without), 1),
                          "spread_without_ns": round(max(without) - min(without), 1),
                          "shim_python_calls_per_1000_launches": calls}
    assert triton is not None
    return results


def bench_listener(n):
    import triton  # pylint: disable=import-outside-toplevel
    from triton.backends.compiler import GPUTarget  # pylint: disable=import-outside-toplevel
    from triton.compiler import ASTSource  # pylint: disable=import-outside-toplevel
    from kerncap_shim._state import SHIM  # pylint: disable=import-outside-toplevel
    import shim_test_kernels as k  # pylint: disable=import-outside-toplevel
    captured = {}

    def grab(**kw):
        captured.update(kw)

    old = triton.knobs.compilation.listener
    triton.knobs.compilation.listener = grab
    try:
        t0 = time.perf_counter()
        triton.compile(ASTSource(k.kc_add_kernel, dict(k.ADD_SIGNATURE), {"BLOCK": 64}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
        compile_s = time.perf_counter() - t0
    finally:
        triton.knobs.compilation.listener = old
    out = {"triton_compile_ms_for_scale": round(compile_s * 1e3, 1)}
    SHIM.install(agent=lambda name, data: 0)
    try:
        SHIM.registry.clear()

        def with_agent():
            SHIM.registry.clear()  # each call records afresh (no dedup)
            SHIM.on_listener(captured)

        out["listener_with_agent_us"] = round(per_call_ns(with_agent, max(1, n // 100)) / 1e3, 1)
        SHIM.link.reset()
        saved = {v: os.environ.pop(v) for v in ("CUDA_INJECTION64_PATH", "LD_PRELOAD", "HSA_TOOLS_LIB",
                                                  "KERNCAP_SHIM_AGENT") if v in os.environ}
        try:
            SHIM.link.resolve()  # the once-a-second /proc/self/maps scan, out of the loop
            out["listener_no_agent_us"] = round(per_call_ns(lambda: SHIM.on_listener(captured), n) / 1e3, 2)
        finally:
            os.environ.update(saved)
    finally:
        SHIM.uninstall()
        SHIM.link.reset()
    return out


def bench_startup(runs):
    import site  # pylint: disable=import-outside-toplevel
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    if not any(os.path.exists(os.path.join(d, "kerncap_triton_shim.pth")) for d in dirs):
        return {"skipped": "kerncap_triton_shim.pth not installed for %s" % sys.executable}
    env_off = dict(os.environ)
    env_off.pop("KERNCAP_TRITON_SHIM", None)
    env_on = dict(env_off, KERNCAP_TRITON_SHIM="1")
    off, on = [], []
    for _ in range(runs):
        for env, acc in ((env_off, off), (env_on, on)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            acc.append(time.perf_counter() - t0)
    a, b = statistics.median(off), statistics.median(on)
    return {"startup_without_ms": round(a * 1e3, 2), "startup_with_ms": round(b * 1e3, 2),
            "overhead_ms": round((b - a) * 1e3, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import triton  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        print("SKIP: triton not importable: %s" % e)
        return 77
    res = {"launch": bench_launch(args.launches, args.rounds), "hooks": bench_listener(args.launches),
           "startup": bench_startup(max(3, args.rounds))}
    if args.json:
        print(json.dumps(res))
        return 0
    print("launch path (fake driver, %d launches x %d rounds, medians):" % (args.launches, args.rounds))
    for label, r in res["launch"].items():
        print("  %-17s median: without %8.1f ns/call, with %8.1f ns/call, overhead %+7.1f ns (%+.2f%%)"
              % (label, r["without_ns"], r["with_ns"], r["overhead_ns"], r["overhead_pct"]))
        print("  %-17s best round: without %8.1f, with %8.1f, overhead %+7.1f ns; spread between rounds "
              "(without) %.1f ns" % ("", r["min_without_ns"], r["min_with_ns"], r["min_overhead_ns"],
                                     r["spread_without_ns"]))
        print("  %-17s calls into kerncap_shim code during 1000 launches (sys.setprofile): %d"
              % ("", r["shim_python_calls_per_1000_launches"]))
    h = res["hooks"]
    print("compile-time hooks (one triton.compile here took %.1f ms):" % h["triton_compile_ms_for_scale"])
    print("  listener, agent present: %8.1f us per compiled kernel (record + JSON + hand-over)"
          % h["listener_with_agent_us"])
    print("  listener, no agent:      %8.2f us per compiled kernel (early return)" % h["listener_no_agent_us"])
    s = res["startup"]
    if "skipped" in s:
        print("interpreter start-up: skipped (%s)" % s["skipped"])
    else:
        print("interpreter start-up: %.2f ms without, %.2f ms with KERNCAP_TRITON_SHIM=1 (%+.2f ms)"
              % (s["startup_without_ms"], s["startup_with_ms"], s["overhead_ms"]))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
