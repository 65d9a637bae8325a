"""Inductor's CachingAutotuner hooks, against a stand-in class with the
attributes and methods torch 2.x has (torch/_inductor/runtime/
triton_heuristics.py): compile_results (kernel, config, compile_meta),
launchers (config), _make_launchers, autotune_to_one_config,
coordinate_descent_tuning. torch is not needed; the real thing is exercised
by tests/gpu/torch_compile_model.py on the GPU machine."""
import types

import pytest

from conftest import sha256


class _Launcher:
    def __init__(self, result):
        self.config = result.config
        self.bin = result.kernel


class _Result:
    def __init__(self, kernel, config, compile_meta):
        self.kernel, self.config, self.compile_meta = kernel, config, compile_meta


class _StaticKernel:
    """Like torch's StaticallyLaunchedCudaKernel: no asm, a raw cubin."""

    def __init__(self, ck):
        self.cubin = ck.asm["cubin"]
        self.name = ck.name
        self.hash = ck.hash
        self.num_warps = ck.metadata.num_warps
        self.shared = ck.metadata.shared


def _make_module(fn, results, bench_pick=0):
    class CachingAutotuner:
        def __init__(self):
            self.fn = fn
            self.configs = None  # dropped after precompile, as in torch
            self.compile_results = results
            self.launchers = []
            self.inductor_meta = {"kernel_name": fn.__name__, "backend_hash": "abc", "num_load": 2}
            self.triton_meta = {"device": 0, "device_type": "cuda"}
            self.filename = "/tmp/torchinductor_x/ab/cabcdef.py"
            self.kernel_hash = "cabcdef"
            self.heuristic_type = "HeuristicType.POINTWISE"
            self.size_hints = {"x": 1024}
            self.mutated_arg_names = ["in_out_ptr0"]
            self.custom_kernel = False
            self.autotune_cache_info = {"autotune_cache_state": "miss", "num_configs": len(results)}

        def _make_launchers(self):
            self.launchers = [_Launcher(r) for r in self.compile_results]

        def autotune_to_one_config(self, *args, **kwargs):
            self.launchers = [self.launchers[bench_pick]]

        def coordinate_descent_tuning(self, launcher, *args, **kwargs):
            return launcher

    return types.SimpleNamespace(__name__="fake_triton_heuristics", CachingAutotuner=CachingAutotuner)


def _compile_variants(triton, blocks):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import shim_test_kernels as k
    out = []
    for block, warps in blocks:
        cfg = triton.Config({"BLOCK": block}, num_warps=warps, num_stages=1)
        ck = triton.compile(ASTSource(k.kc_add_kernel, dict(k.ADD_SIGNATURE), {"BLOCK": block}),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1})
        meta = {"signature": dict(k.ADD_SIGNATURE), "constants": {"BLOCK": block}, "num_warps": warps,
                "num_stages": 1, "device": 0, "device_type": "cuda", "cc": 90, "configs": [{}]}
        out.append((ck, cfg, meta))
    return k.kc_add_kernel, out


@pytest.mark.parametrize("static", [False, True])
def test_inductor_variants_and_choice(triton_mod, shim, static):
    from conftest import Recorder
    from kerncap_shim import _inductor
    fn, compiled = _compile_variants(triton_mod, [(64, 2), (128, 4)])
    rec = Recorder()
    shim.install(agent=rec)
    # The parent process of torch.compile does not call triton.compile (the
    # workers did): only what the CachingAutotuner hooks see counts here.
    shim.registry.clear()
    results = [_Result(_StaticKernel(ck) if static else ck, cfg, meta) for ck, cfg, meta in compiled]
    mod = _make_module(fn, results, bench_pick=1)
    hooks = _inductor.InductorHooks(shim)
    hooks.install(mod)
    shim.inductor = hooks
    try:
        ca = mod.CachingAutotuner()
        ca._make_launchers()  # pylint: disable=protected-access
        doc = rec.last("kc_add_kernel")
        assert [v["binary"]["sha256"] for v in doc["variants"]] == [sha256(ck.asm["cubin"]) for ck, _, _ in compiled]
        assert [v["constexprs"] for v in doc["variants"]] == [{"BLOCK": 64}, {"BLOCK": 128}]
        assert [v["num_warps"] for v in doc["variants"]] == [2, 4]
        assert doc["variants"][0]["via"] == ("inductor-static-launcher" if static else "inductor")
        assert doc["inductor"]["file"] == "/tmp/torchinductor_x/ab/cabcdef.py"
        assert doc["inductor"]["kernel_name"] == "kc_add_kernel"
        assert doc["inductor"]["mutated_arg_names"] == ["in_out_ptr0"]
        assert doc["autotune"]["kind"] == "inductor.CachingAutotuner"
        assert [c["kwargs"] for c in doc["autotune"]["configs"]] == [{"BLOCK": 64}, {"BLOCK": 128}]
        assert "chosen" not in doc["autotune"]
        assert "def kc_add_kernel" in doc["functions"][doc["variants"][0]["function"]]["source"]
        ca.autotune_to_one_config()
        doc = rec.last("kc_add_kernel")
        assert doc["autotune"]["chosen"]["kwargs"] == {"BLOCK": 128} and doc["autotune"]["chosen_index"] == 1
        assert doc["current"] == sha256(compiled[1][0].asm["cubin"])
        # Later launches are not hooked at all.
        n = len(rec.calls)
        ca.coordinate_descent_tuning(ca.launchers[0])
        assert len(rec.calls) == n  # same choice, same document
    finally:
        hooks.uninstall()
        shim.inductor = None
    assert not getattr(mod.CachingAutotuner._make_launchers, "kerncap_shim", False)  # pylint: disable=protected-access


class _WarmStaticKernel:
    """A StaticallyLaunchedCudaKernel as a warm FX graph cache hands it
    back: no cubin in memory (prepare_for_caching dropped cubin_raw), no
    cubin_path (cleared when it was loaded); its file in the Triton cache is
    written by make_launcher (reload_cubin_path)."""

    def __init__(self, ck):
        self.cubin_raw = None
        self.cubin_path = None
        self.name = ck.name
        self.hash = ck.hash
        self.num_warps = ck.metadata.num_warps
        self.shared = ck.metadata.shared
        self._bytes = ck.asm["cubin"]


def test_inductor_kernel_from_a_warm_cache_gets_its_digest(triton_mod, shim, tmp_path, monkeypatch):
    """A second process with a populated Inductor/Triton cache: the
    CachingAutotuner comes back pickled (fn.fn dropped), goes through
    precompile() and _make_launchers() only, and its static kernels' cubins
    appear on disk during _make_launchers. The document must still carry
    each binary's digest, the source and the choice."""
    import copy
    from conftest import Recorder
    from kerncap_shim import _inductor
    fn, compiled = _compile_variants(triton_mod, [(256, 4)])
    pickled_fn = copy.copy(fn)
    pickled_fn.fn = None  # CachingAutotuner.prepare_for_pickle
    cache = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    rec = Recorder()
    shim.install(agent=rec)
    shim.registry.clear()
    results = [_Result(_WarmStaticKernel(ck), cfg, meta) for ck, cfg, meta in compiled]
    mod = _make_module(pickled_fn, results)
    base = mod.CachingAutotuner

    class Warm(base):
        def precompile(self, warm_cache_only=False, reload_kernel=None, static_triton_bundle_key=None):
            self._make_launchers()

        def _make_launchers(self):
            for r in self.compile_results:  # reload_cubin_path, then load_kernel
                d = cache / ("key-" + r.kernel.hash[:8])
                d.mkdir(parents=True, exist_ok=True)
                (d / (r.kernel.name + ".cubin")).write_bytes(r.kernel._bytes)
            base._make_launchers(self)

    mod.CachingAutotuner = Warm
    mod.triton_hash_to_path_key = lambda h: "key-" + h[:8]
    mod.triton_cache_dir = lambda device: str(cache)
    hooks = _inductor.InductorHooks(shim)
    hooks.install(mod)
    shim.inductor = hooks
    try:
        ca = mod.CachingAutotuner()
        ca.precompile()
        doc = rec.last("kc_add_kernel")
        v = doc["variants"][0]
        assert v["binary"]["sha256"] == sha256(compiled[0][0].asm["cubin"]), v
        assert v["via"] == "inductor-static-launcher"
        assert doc["current"] == v["id"] and doc["autotune"]["chosen_index"] == 0
        f = doc["functions"][v["function"]]
        assert "def kc_add_kernel" in f["source"] and f["inductor_file"] == "/tmp/torchinductor_x/ab/cabcdef.py"
        assert shim.registry.stats["inductor_hook_precompile"] == 1
        assert shim.registry.stats["inductor_hook__make_launchers"] == 1
    finally:
        hooks.uninstall()
        shim.inductor = None
