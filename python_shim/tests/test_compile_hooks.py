"""Compile-time recording with a real Triton, no GPU: kernels are compiled
for explicit targets (sm_90, gfx90a) with triton.compile, and the JIT and
autotuner paths run against a fake driver (fake_triton_driver.py)."""
import inspect
import os

import pytest

from conftest import sha256, triton_or_skip


def _knobs_or_skip(triton):
    if not hasattr(triton, "knobs"):
        pytest.skip("triton %s predates triton.knobs (3.4); the legacy path is tested separately"
                    % triton.__version__)


def _expected_via(shim):
    return "compilation_listener" if shim.triton.mode == "knobs" else "CompiledKernel.__init__"


def _compile_add(triton, block=1024, num_warps=4, target=None, attrs=None):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import shim_test_kernels as k
    attrs = attrs if attrs is not None else {(0,): [["tt.divisibility", 16]]}
    target = target or GPUTarget("cuda", 90, 32)
    if not hasattr(triton, "knobs"):
        attrs = None  # Triton < 3.3 takes an AttrsDescriptor here; leave it default
    src = ASTSource(k.kc_add_kernel, dict(k.ADD_SIGNATURE), {"BLOCK": block}, attrs)
    return triton.compile(src, target=target, options={"num_warps": num_warps})


def test_compile_records_everything(triton_mod, shim, recorder):
    import shim_test_kernels as k
    ck = _compile_add(triton_mod, block=1024, num_warps=4)
    assert shim.triton.mode == ("knobs" if hasattr(triton_mod, "knobs") else "legacy")
    doc = recorder.last("kc_add_kernel")
    assert doc["schema"] == "kerncap.triton-jit/1"
    assert doc["kernel_name"] == "kc_add_kernel" == ck.name
    assert doc["producer"]["triton"] == triton_mod.__version__
    v = doc["variants"][-1]
    assert doc["current"] == v["id"]
    # The digest is that of the bytes the driver loads (kernel.asm["cubin"]).
    assert v["binary"] == {"format": "cubin", "sha256": sha256(ck.asm["cubin"]), "size": len(ck.asm["cubin"])}
    assert v["id"] == sha256(ck.asm["cubin"])
    assert v["triton_hash"] == ck.hash
    assert v["target"]["backend"] == "cuda" and v["target"]["arch"] == 90 and v["target"]["name"] == "sm_90"
    assert v["num_warps"] == 4 and v["num_stages"] == ck.metadata.num_stages
    assert v["num_ctas"] == 1 and "maxnreg" in v and v["shared"] == ck.metadata.shared
    assert v["constexprs"] == {"BLOCK": 1024}
    assert v["signature"] == k.ADD_SIGNATURE
    if shim.triton.mode == "knobs":
        assert v["specialization"]["x_ptr"] == [["tt.divisibility", 16]]
    assert v["via"] == _expected_via(shim)
    if shim.triton.mode == "knobs":
        assert v["cache_hit"] is False
    assert v["triton_version"] == triton_mod.__version__
    f = doc["functions"][v["function"]]
    assert f["name"] == "kc_add_kernel"
    assert f["file"] == os.path.abspath(k.__file__) or f["file"] == k.__file__
    lines, start = inspect.getsourcelines(k.kc_add_kernel.fn)
    assert f["first_line"] == start
    assert "def kc_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):" in f["source"]
    assert f["source_truncated"] is False and f["source_sha256"] == sha256(f["source"].encode())
    assert [p["name"] for p in f["params"]] == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]
    assert [p["constexpr"] for p in f["params"]] == [False, False, False, False, True]
    assert "autotune" not in doc


def test_cache_hit_and_second_variant(triton_mod, shim, recorder):
    a = _compile_add(triton_mod, block=256, num_warps=2)
    n_calls = len(recorder.calls)
    again = _compile_add(triton_mod, block=256, num_warps=2)  # Triton's cache hit
    assert again.hash == a.hash
    # Same binary, same document: the agent is not called again.
    assert len(recorder.calls) == n_calls
    b = _compile_add(triton_mod, block=512, num_warps=8)
    doc = recorder.last("kc_add_kernel")
    ids = [v["id"] for v in doc["variants"]]
    assert ids == [sha256(a.asm["cubin"]), sha256(b.asm["cubin"])]
    assert doc["current"] == sha256(b.asm["cubin"])
    assert [v["constexprs"]["BLOCK"] for v in doc["variants"]] == [256, 512]
    # Both variants come from the same Python function: one source.
    assert len(doc["functions"]) == 1


def test_hip_target_records_hsaco(triton_mod, shim, recorder):
    from triton.backends.compiler import GPUTarget
    try:
        ck = _compile_add(triton_mod, target=GPUTarget("hip", "gfx90a", 64), attrs={})
    except Exception as e:  # pylint: disable=broad-except
        pytest.skip("this triton cannot compile for gfx90a here: %s" % e)
    v = recorder.last("kc_add_kernel")["variants"][-1]
    assert v["binary"]["format"] == "hsaco"
    assert v["binary"]["sha256"] == sha256(ck.asm["hsaco"])
    assert v["target"] == {"backend": "hip", "arch": "gfx90a", "warp_size": 64, "name": "gfx90a"}


def test_chains_hooks_installed_before(triton_mod, shim):
    from conftest import Recorder
    _knobs_or_skip(triton_mod)
    knobs = triton_mod.knobs
    seen = []

    def user_listener(**kw):
        seen.append(("listener", kw["src"].name))

    def user_post_hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):  # noqa: A002
        seen.append(("post", fn.name))
        return None

    old_l, old_p = knobs.compilation.listener, knobs.runtime.jit_post_compile_hook
    knobs.compilation.listener = user_listener
    knobs.runtime.jit_post_compile_hook = user_post_hook
    try:
        rec = Recorder()
        shim.install(agent=rec)
        assert knobs.compilation.listener is not user_listener
        # Inductor reads the hook's signature to decide what to pass.
        assert "already_compiled" in inspect.signature(knobs.runtime.jit_post_compile_hook).parameters
        _compile_add(triton_mod, block=128)
        assert ("listener", "kc_add_kernel") in seen
        assert rec.last("kc_add_kernel")["variants"]
        shim.uninstall()
        assert knobs.compilation.listener is user_listener
        assert knobs.runtime.jit_post_compile_hook is user_post_hook
    finally:
        knobs.compilation.listener, knobs.runtime.jit_post_compile_hook = old_l, old_p


def test_uninstall_restores_and_stops(triton_mod, shim, recorder):
    _knobs_or_skip(triton_mod)
    knobs = triton_mod.knobs
    shim.uninstall()
    assert knobs.compilation.listener is None
    assert knobs.runtime.jit_post_compile_hook is None
    n = len(recorder.calls)
    _compile_add(triton_mod, block=64)
    assert len(recorder.calls) == n


def test_legacy_mode_wraps_compiled_kernel(triton_mod, shim):
    from conftest import Recorder
    from triton.compiler import compiler as tc
    orig = tc.CompiledKernel.__init__
    rec = Recorder()
    shim.install(agent=rec, mode="legacy")
    assert shim.triton.mode == "legacy"
    assert tc.CompiledKernel.__init__ is not orig
    ck = _compile_add(triton_mod, block=2048, num_warps=4)
    doc = rec.last("kc_add_kernel")
    v = doc["variants"][-1]
    assert v["via"] == "CompiledKernel.__init__"
    assert v["binary"]["sha256"] == sha256(ck.asm["cubin"])
    assert v["constexprs"] == {"BLOCK": 2048} and v["num_warps"] == 4
    assert "def kc_add_kernel" in doc["functions"][v["function"]]["source"]
    shim.uninstall()
    assert tc.CompiledKernel.__init__ is orig


def test_source_truncation_is_flagged(triton_mod, shim, recorder, monkeypatch):
    monkeypatch.setenv("KERNCAP_SHIM_MAX_SOURCE", "100")
    _compile_add(triton_mod, block=32)
    doc = recorder.last("kc_add_kernel")
    f = doc["functions"][doc["variants"][-1]["function"]]
    assert f["source_truncated"] is True
    assert len(f["source"]) <= 100 < f["source_bytes"]


def test_nothing_recorded_without_agent(triton_mod, shim, monkeypatch):
    for var in ("CUDA_INJECTION64_PATH", "LD_PRELOAD", "HSA_TOOLS_LIB", "KERNCAP_SHIM_AGENT"):
        monkeypatch.delenv(var, raising=False)
    shim.install()
    _compile_add(triton_mod, block=4096)
    assert shim.registry.names() == []
    assert shim.registry.stats.get("variants", 0) == 0


def test_agent_named_but_not_loaded_keeps_records(triton_mod, shim, monkeypatch, tmp_path):
    # CUDA_INJECTION64_PATH names an agent the driver has not loaded yet
    # (no cuInit so far): the metadata is kept and handed over later.
    monkeypatch.setenv("CUDA_INJECTION64_PATH", str(tmp_path / "libkerncap_agent.so"))
    shim.install()
    _compile_add(triton_mod, block=8192)
    assert "kc_add_kernel" in shim.registry.names()
    assert shim.registry.stats["no_agent"] >= 1
    from conftest import Recorder
    rec = Recorder()
    shim.link.set_override(rec)
    _compile_add(triton_mod, block=16)  # any later compile flushes everything
    assert rec.last("kc_add_kernel")["variants"][0]["constexprs"] == {"BLOCK": 8192}


# ---------------------------------------------------------------------------
# JIT and autotuner paths (fake driver)


def _fake_driver(timing=None):
    triton_or_skip()
    import fake_triton_driver as fd
    return fd, fd.activate(timing=timing)


def test_autotuner_choice_becomes_current(triton_mod, shim, recorder):
    import shim_test_kernels as k
    # Benchmark timings per candidate, in the order benchmarked: the middle
    # config wins, and it is not the last one compiled.
    fd, drv = _fake_driver(timing=lambda i: [3.0, 1.0, 2.0][i % 3])
    x = fd.FakeTensor(0x7f0000000000)
    k.kc_tuned_scale[(8,)](x, 1000, 2.0)
    assert k.kc_tuned_scale.best_config.kwargs == {"BLOCK": 256}
    doc = recorder.last("kc_tuned_scale")
    at = doc["autotune"]
    assert at["kind"] == "triton.Autotuner" and at["key_args"] == ["n"]
    assert [c["kwargs"]["BLOCK"] for c in at["configs"]] == [128, 256, 512]
    want = {"kwargs": {"BLOCK": 256}, "num_warps": 8, "num_stages": 3, "num_ctas": 1}
    assert {k2: at["configs"][1].get(k2) for k2 in want} == want
    assert at["chosen"]["kwargs"] == {"BLOCK": 256} and at["chosen_index"] == 1
    assert at["tuning_cache"][-1]["config_index"] == 1
    assert len(doc["variants"]) == 3
    by_block = {v["constexprs"]["BLOCK"]: v for v in doc["variants"]}
    assert {v["config_index"] for v in doc["variants"]} == {0, 1, 2}
    assert by_block[256]["num_warps"] == 8 and by_block[256]["num_stages"] == 3
    assert by_block[512]["num_stages"] == 4
    assert all(v["compiled_during"] == "autotune benchmark" for v in doc["variants"])
    # The variant expected on the GPU next is the chosen one.
    assert doc["current"] == by_block[256]["id"] == at["chosen_variant"]
    assert doc["variants"][-1]["constexprs"]["BLOCK"] == 512  # compiled last, not chosen
    # The runtime (alpha) is not a constexpr; n is specialised (not 16-divisible).
    assert by_block[256]["signature"]["alpha"] == "fp32"
    # Steady state: launches hand nothing to the agent.
    n = len(recorder.calls)
    for _ in range(20):
        k.kc_tuned_scale[(8,)](x, 1000, 2.0)
    assert len(recorder.calls) == n
    assert type(k.kc_tuned_scale.cache).__name__ == "ChoiceDict"
    # A new tuning key: benchmarking again; this time BLOCK=128 wins.
    drv.timing = lambda i: [0.5, 1.0, 2.0][i % 3]
    drv.bench_calls = 0
    k.kc_tuned_scale[(8,)](x, 5000, 2.0)
    doc = recorder.last("kc_tuned_scale")
    assert doc["autotune"]["chosen"]["kwargs"] == {"BLOCK": 128}
    cur = [v for v in doc["variants"] if v["id"] == doc["current"]][0]
    assert cur["constexprs"]["BLOCK"] == 128
    assert len(doc["autotune"]["tuning_cache"]) == 2
    shim.uninstall()
    assert type(k.kc_tuned_scale.cache) is dict


def test_autotuner_with_more_configs_than_kept_keeps_the_winner(triton_mod, shim, recorder):
    """20 candidates, a table of 16: the winner (benchmarked third) is
    evicted while the 17 later candidates compile, unless the choice takes
    it back. The document must hold the chosen binary and say so."""
    import shim_test_kernels as k
    from kerncap_shim import _registry
    assert len(k.MANY_CONFIGS) > _registry.MAX_VARIANTS
    fd, _ = _fake_driver(timing=lambda i: 0.5 if i == 2 else 1.0)
    x = fd.FakeTensor(0x7f0000500000)
    k.kc_many_configs[(4,)](x, 4096)
    best = k.kc_many_configs.best_config
    assert (best.kwargs, best.num_warps) == ({"BLOCK": 32}, 4)
    doc = recorder.last("kc_many_configs")
    at = doc["autotune"]
    assert at["chosen_index"] == 2 and at["chosen"]["kwargs"] == {"BLOCK": 32}
    # The binary the JIT holds for the chosen config.
    jit = k.kc_many_configs.fn
    want = [sha256(ck.asm["cubin"]) for cache in jit.device_caches.values() for ck in cache[0].values()
            if ck.metadata.num_warps == 4 and ck.src.constants.get((2,)) == 32]
    assert len(want) == 1
    cur = next(v for v in doc["variants"] if v["id"] == doc["current"])
    assert cur["binary"]["sha256"] == want[0] == at["chosen_variant"]
    assert cur["constexprs"]["BLOCK"] == 32 and cur["num_warps"] == 4
    assert cur["config_index"] == 2
    assert doc["pinned"] == [want[0]]
    assert doc["evicted_variants"] >= len(k.MANY_CONFIGS) - _registry.MAX_VARIANTS
    assert len(doc["variants"]) <= _registry.MAX_VARIANTS + 1
    # Later compiles of other kernels, or of this one for another key, do
    # not evict the pinned choice.
    fd.activate(timing=lambda i: 0.5 if i == 19 else 1.0)
    k.kc_many_configs[(4,)](x, 1000)
    doc = recorder.last("kc_many_configs")
    ids = {v["id"] for v in doc["variants"]}
    assert want[0] in ids and len(doc["pinned"]) == 2
    assert doc["autotune"]["chosen_index"] == 19


def test_heuristics_and_single_config(triton_mod, shim, recorder):
    import shim_test_kernels as k
    fd, _ = _fake_driver()
    a, b = fd.FakeTensor(0x7f0000100000), fd.FakeTensor(0x7f0000200000)
    k.kc_heuristic_copy[(1,)](a, b, 100)
    v = recorder.last("kc_heuristic_copy")["variants"][-1]
    assert v["constexprs"] == {"BLOCK": 64}
    k.kc_single_config[(1,)](a, 100)
    doc = recorder.last("kc_single_config")
    assert doc["autotune"]["chosen"]["kwargs"] == {"BLOCK": 32} and doc["autotune"]["chosen_index"] == 0
    assert doc["variants"][-1]["num_warps"] == 2
    assert doc["autotune"]["chosen_variant"] == doc["current"]


def test_jit_respecialisation_is_a_new_variant(triton_mod, shim, recorder):
    import shim_test_kernels as k
    fd, _ = _fake_driver()
    x, y, o = (fd.FakeTensor(0x7f0000300000 + i * 0x1000) for i in range(3))
    k.kc_add_kernel[(4,)](x, y, o, 1024, BLOCK=256)   # n divisible by 16
    k.kc_add_kernel[(4,)](x, y, o, 1000, BLOCK=256)   # not divisible: another binary
    doc = recorder.last("kc_add_kernel")
    assert len(doc["variants"]) == 2
    if hasattr(triton_mod, "knobs"):
        specs = [v["specialization"]["n"] for v in doc["variants"]]
        assert specs[0] == [["tt.divisibility", 16]] and specs[1] == []
    assert doc["current"] == doc["variants"][-1]["id"]
    # Both were compiled for launches, outside any autotuner.
    assert "compiled_during" not in doc["variants"][0]


def test_launch_path_runs_no_shim_code(triton_mod, shim, recorder):
    """Once compiled and tuned, launches execute no Python code of the shim
    (counted exactly with sys.setprofile; timings are in bench_hooks.py)."""
    import shim_test_kernels as k
    from bench_hooks import shim_calls_during
    fd, _ = _fake_driver(timing=lambda i: [2.0, 1.0, 3.0][i % 3])
    x, y, o = (fd.FakeTensor(0x7f0000400000 + i * 0x1000) for i in range(3))

    def plain():
        k.kc_add_kernel[(4,)](x, y, o, 4096, BLOCK=64)

    def tuned():
        k.kc_tuned_scale[(4,)](x, 3000, 0.5)

    plain()
    tuned()
    assert recorder.calls  # the compiles were recorded...
    assert shim_calls_during(plain, 200) == 0  # ...the launches run none of our code
    assert shim_calls_during(tuned, 200) == 0


def test_compile_records_launch_extents_build_and_def_line(triton_mod, shim, recorder, monkeypatch):
    """What a reproducer needs to rebuild the binary where the application
    did and to tell buffers sharing an allocation apart: the extents of the
    tensors of the launch that compiled (with its scalars), the ptxas and
    the cache-key environment, the def's line, the application's sys.path."""
    import inspect as _inspect
    import sys as _sys
    import shim_test_kernels as k
    _knobs_or_skip(triton_mod)
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")
    fd, _ = _fake_driver()
    x = fd.FakeTensor(0x7f0000600000, shape=(64, 16))
    y = fd.FakeTensor(0x7f0000600000 + 4096, shape=(1024,))
    o = fd.FakeTensor(0x7f0000600000 + 8192, shape=(32, 32), strides=(64, 1))
    k.kc_add_kernel[(4,)](x, y, o, 1024, BLOCK=128)
    doc = recorder.last("kc_add_kernel")
    v = doc["variants"][-1]
    ca = v["compile_args"]
    assert ca["scalars"] == {"n": 1024, "BLOCK": 128}
    assert ca["tensors"]["x_ptr"] == {"dtype": "torch.float32", "element_size": 4, "shape": [64, 16],
                                      "strides": [16, 1], "span_bytes": 4096}
    # A strided view spans more than its elements.
    assert ca["tensors"]["out_ptr"]["span_bytes"] == (31 * 64 + 31 + 1) * 4
    b = v["build"]
    assert b["env"]["TRITON_DISABLE_LINE_INFO"] == "1"
    assert b["ptxas"]["path"] == triton_mod.knobs.nvidia.ptxas.path
    assert b["ptxas"]["version"] == triton_mod.knobs.nvidia.ptxas.version
    assert b["debug_knob"] is False
    f = doc["functions"][v["function"]]
    lines, start = _inspect.getsourcelines(k.kc_add_kernel.fn)
    assert f["def_line"] == start + next(i for i, ln in enumerate(lines) if ln.startswith("def "))
    assert doc["producer"]["sys_path"] == [p for p in _sys.path if p][:64]
