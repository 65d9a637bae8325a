"""torch.compile (Inductor) kernels.

Inductor compiles its generated Triton kernels through its own
``CachingAutotuner`` (torch/_inductor/runtime/triton_heuristics.py), usually
in compile worker processes; the parent process, where the agent is and
where the kernels are launched, often never calls ``triton.compile`` (the
compiled results come back from the workers or from the FX graph cache, and
may be launched by torch's static CUDA launcher rather than Triton's). So
the compile listener alone would miss them.

Three methods of CachingAutotuner are wrapped at class level; all run once
per kernel (or per autotuning), never per launch:

* ``_make_launchers``: the compiled variants (one per config) are loaded in
  the parent; each is recorded with its cubin/hsaco digest, config and
  Inductor's metadata. When there is one launcher left, that is the choice.
* ``autotune_to_one_config``: benchmarking picked ``launchers[0]``.
* ``coordinate_descent_tuning``: returns the launcher it settled on.

What is recorded: the kernel name (the entry point, equal to
inductor_meta["kernel_name"]), the source Inductor generated and the file it
wrote it to, the candidate configs and the chosen one, the heuristic type and
size hints, mutated argument names.
"""
import os
import sys
import types

from . import _record

_METHODS = ("precompile", "_make_launchers", "autotune_to_one_config", "coordinate_descent_tuning")


def _name_of(ca, result=None):
    k = getattr(result, "kernel", None) if result is not None else None
    if k is not None:
        md = _record.metadata_dict(getattr(k, "metadata", None))
        n = md.get("name") or getattr(k, "name", None)
        if n:
            return str(n)
    fn = getattr(ca, "fn", None)
    n = getattr(fn, "__name__", None)
    if n:
        return str(n)
    im = getattr(ca, "inductor_meta", None) or {}
    n = im.get("kernel_name")
    return str(n) if n else None


class InductorHooks:
    def __init__(self, state):
        self.state = state
        self.cls = None
        self.module = None
        self.originals = {}

    def install(self, mod):
        cls = getattr(mod, "CachingAutotuner", None)
        if cls is None:
            raise RuntimeError("CachingAutotuner not found in %s" % mod.__name__)
        self.cls = cls
        self.module = mod
        for meth in _METHODS:
            orig = cls.__dict__.get(meth)
            if orig is None or getattr(orig, "kerncap_shim", False):
                continue
            wrapper = self._wrap(meth, orig)
            setattr(cls, meth, wrapper)
            self.originals[meth] = orig

    def uninstall(self):
        for meth, orig in self.originals.items():
            cur = self.cls.__dict__.get(meth)
            if getattr(cur, "kerncap_shim", False):
                setattr(self.cls, meth, orig)
        self.originals.clear()

    def _wrap(self, meth, orig):
        hooks = self
        state = self.state

        if meth in ("_make_launchers", "precompile"):
            # Both run once per kernel. precompile() is where a kernel loaded
            # from Inductor's caches (a warm FX graph cache hands back pickled
            # CachingAutotuners with their compile results) enters the
            # parent process; _make_launchers() follows. Recorded before
            # (while the compile results still hold their cubin paths) and
            # again after for anything recorded without its binary: a
            # statically launched kernel from the cache has no cubin in
            # memory, and its file in the Triton cache is (re)written by
            # make_launcher (reload_cubin_path).
            def wrapper(self_, *args, **kwargs):
                state.registry.stats["inductor_hook_" + meth] += 1
                try:
                    if state.enabled and state.should_record():
                        hooks.record_results(self_)
                except Exception as e:  # pylint: disable=broad-except
                    state.registry.note_error("inductor " + meth, e)
                out = orig(self_, *args, **kwargs)
                try:
                    if state.enabled and state.should_record():
                        hooks.record_results(self_, missing_only=True)
                    launchers = getattr(self_, "launchers", None) or []
                    if state.enabled and len(launchers) == 1:
                        hooks.record_choice(self_, launchers[0])
                except Exception as e:  # pylint: disable=broad-except
                    state.registry.note_error("inductor " + meth, e)
                return out
        elif meth == "autotune_to_one_config":
            def wrapper(self_, *args, **kwargs):
                out = orig(self_, *args, **kwargs)
                try:
                    launchers = getattr(self_, "launchers", None) or []
                    if state.enabled and launchers:
                        hooks.record_choice(self_, launchers[0])
                except Exception as e:  # pylint: disable=broad-except
                    state.registry.note_error("inductor autotune_to_one_config", e)
                return out
        else:  # coordinate_descent_tuning(self, launcher, *args, **kwargs) -> launcher
            def wrapper(self_, *args, **kwargs):
                out = orig(self_, *args, **kwargs)
                try:
                    if state.enabled and out is not None:
                        hooks.record_choice(self_, out)
                except Exception as e:  # pylint: disable=broad-except
                    state.registry.note_error("inductor coordinate_descent_tuning", e)
                return out

        wrapper.kerncap_shim = True
        wrapper.__wrapped__ = orig
        wrapper.__name__ = getattr(orig, "__name__", meth)
        wrapper.__qualname__ = getattr(orig, "__qualname__", meth)
        wrapper.__doc__ = getattr(orig, "__doc__", None)
        return wrapper

    # -- descriptions ------------------------------------------------------------

    def describe(self, ca):
        im = getattr(ca, "inductor_meta", None) or {}
        tm = getattr(ca, "triton_meta", None) or {}
        d = {
            "kernel_name": im.get("kernel_name"),
            "file": getattr(ca, "filename", None),
            "kernel_hash": getattr(ca, "kernel_hash", None) or None,
            "heuristic_type": str(getattr(ca, "heuristic_type", "")) or None,
            "size_hints": _record.jsonable(getattr(ca, "size_hints", None), 1),
            "mutated_arg_names": _record.jsonable(list(getattr(ca, "mutated_arg_names", []) or []), 1),
            "reset_to_zero_arg_names": _record.jsonable(
                list(getattr(ca, "reset_to_zero_arg_names", []) or []), 1),
            "custom_kernel": bool(getattr(ca, "custom_kernel", False)),
            "device": _record.jsonable(tm.get("device"), 1),
            "device_type": _record.jsonable(tm.get("device_type"), 1),
        }
        info = getattr(ca, "autotune_cache_info", None)
        if info:
            d["autotune_cache_info"] = _record.jsonable(info, 1)
        for k in ("backend_hash", "grid_type", "num_load", "num_reduction", "kernel_num_gb", "kernel_flop",
                  "persistent_reduction", "coordinate_descent_tuning", "autotune_pointwise",
                  "are_deterministic_algorithms_enabled", "store_cubin", "optimize_mem"):
            if k in im:
                d[k] = _record.jsonable(im[k], 1)
        return {k: v for k, v in d.items() if v is not None}

    def _configs(self, ca):
        configs = getattr(ca, "configs", None)
        if configs:
            return list(configs)
        return [getattr(r, "config", None) for r in (getattr(ca, "compile_results", None) or [])
                if getattr(r, "config", None) is not None]

    def autotune_snapshot(self, ca, fkey, chosen=None, configs_hint=None):
        configs = self._configs(ca)
        snap = {"kind": "inductor.CachingAutotuner", "function": fkey,
                "configs": [_record.config_json(c) for c in configs[:512]]}
        if chosen is not None:
            cj = _record.config_json(chosen)
            snap["chosen"] = cj
            for i, c in enumerate(snap["configs"]):
                if c == cj:
                    snap["chosen_index"] = i
                    break
        elif len(configs) == 1:
            snap["chosen"] = snap["configs"][0]
            snap["chosen_index"] = 0
        return snap

    def _function(self, ca):
        fn = getattr(ca, "fn", None)
        if fn is None or not hasattr(fn, "arg_names"):
            return None
        key, info = _record.function_info(fn, file_hint=getattr(ca, "filename", None))
        if getattr(ca, "filename", None):
            # The module file of an Inductor kernel is the file Inductor wrote.
            info["inductor_file"] = ca.filename
        return key, info

    # -- recording ---------------------------------------------------------------

    def record_results(self, ca, missing_only=False):
        """Records every compile result of `ca` not recorded yet with its
        binary digest (missing_only: only those recorded without one)."""
        results = getattr(ca, "compile_results", None) or []
        if not results:
            return
        func = self._function(ca)
        fkey = func[0] if func else None
        desc = self.describe(ca)
        snap = self.autotune_snapshot(ca, fkey)
        reg = self.state.registry
        for r in results:
            name = _name_of(ca, r)
            if not name:
                continue
            k = getattr(r, "kernel", None)
            h = getattr(k, "hash", None) or _record.metadata_dict(getattr(k, "metadata", None)).get("hash")
            if h:
                known = reg.variant_by_hash(name, h)
                if known is not None and (known.get("binary") or {}).get("sha256"):
                    # Already recorded (e.g. by the compile listener in this
                    # process); only add what Inductor knows.
                    if not missing_only:
                        reg.set_inductor(name, desc)
                    continue
                if missing_only and known is None:
                    continue
            rec = self._variant(ca, r, k)
            if rec is None:
                continue
            if getattr(r, "config", None) is not None:
                rec["config"] = _record.config_json(r.config)
            reg.add_variant(name, rec, function=func, autotune=snap, inductor=desc)

    def _variant(self, ca, result, k):
        if k is None:
            return None
        cm = getattr(result, "compile_meta", None) or {}
        if hasattr(k, "asm"):  # triton CompiledKernel
            fmt, binary = _record.binary_from_asm(k.asm)
            src = getattr(k, "src", None)
            md = getattr(k, "metadata", None)
            if not hasattr(src, "signature"):
                src = self._src_from_meta(cm)
            return _record.variant_record(src, md, fmt, binary, "inductor", jit_fn=getattr(ca, "fn", None))
        # torch's StaticallyLaunchedCudaKernel: a cubin and a few numbers.
        binary = self._static_cubin(k, cm)
        md = {
            "name": getattr(k, "name", None),
            "hash": getattr(k, "hash", None),
            "num_warps": getattr(k, "num_warps", None),
            "num_stages": cm.get("num_stages"),
            "shared": getattr(k, "shared", None),
        }
        dev_type = cm.get("device_type")
        if dev_type is not None or cm.get("cc") is not None:
            md["target"] = {"backend": dev_type, "arch": cm.get("cc")}
        rec = _record.variant_record(self._src_from_meta(cm), md, "cubin", binary, "inductor-static-launcher",
                                     jit_fn=getattr(ca, "fn", None))
        return rec

    @staticmethod
    def _src_from_meta(cm):
        if not isinstance(cm, dict) or "signature" not in cm:
            return None
        configs = cm.get("configs") or [None]
        return types.SimpleNamespace(signature=cm.get("signature"), constants=cm.get("constants") or {},
                                     attrs=configs[0] if configs else None)

    def _static_cubin(self, k, cm):
        """The cubin of one of torch's StaticallyLaunchedCudaKernels: in
        memory (cubin, cubin_raw: dropped when it went through Inductor's
        caches), at its cubin_path (cleared once loaded), or where Inductor
        keeps it: <triton cache dir>/<hash path key>/<name>.cubin."""
        for attr in ("cubin", "cubin_raw"):
            data = getattr(k, attr, None)
            if isinstance(data, (bytes, bytearray)):
                return bytes(data)
        paths = []
        if getattr(k, "cubin_path", None):
            paths.append(k.cubin_path)
        mod = self.module or sys.modules.get("torch._inductor.runtime.triton_heuristics")
        name, h = getattr(k, "name", None), getattr(k, "hash", None)
        if name and h:
            try:
                key = mod.triton_hash_to_path_key(h)
            except Exception:  # pylint: disable=broad-except
                key = None
            if key:
                try:
                    paths.append(os.path.join(mod.triton_cache_dir(cm.get("device", 0) or 0), key, "%s.cubin" % name))
                except Exception:  # pylint: disable=broad-except
                    pass
                if os.environ.get("TRITON_CACHE_DIR"):
                    paths.append(os.path.join(os.environ["TRITON_CACHE_DIR"], key, "%s.cubin" % name))
        for path in paths:
            try:
                if os.path.getsize(path) > _record.MAX_BINARY_READ:
                    continue
                with open(path, "rb") as f:
                    return f.read()
            except (OSError, TypeError):
                continue
        return None

    def record_choice(self, ca, launcher):
        cfg = getattr(launcher, "config", None)
        if cfg is None or not self.state.should_record():
            return
        results = getattr(ca, "compile_results", None) or []
        name = _name_of(ca, results[0] if results else None)
        if not name:
            return
        func = self._function(ca)
        fkey = func[0] if func else None
        snap = self.autotune_snapshot(ca, fkey, chosen=cfg)
        self.state.registry.set_autotune(name, snap, move_current=True)
