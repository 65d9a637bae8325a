"""The shim's process-wide state and the compile-time recording logic."""
import os
import sys
import threading

from . import _agent, _importhook, _record, _registry, _triton

TRITON = "triton"
INDUCTOR = "torch._inductor.runtime.triton_heuristics"


class Shim:
    def __init__(self):
        self.link = _agent.AgentLink()
        self.registry = _registry.Registry(self.link)
        self.triton = _triton.TritonHooks(self)
        self.inductor = None  # _inductor.InductorHooks once torch's module is seen
        self.enabled = False
        self.mode = "auto"
        self.installed_at = None
        self._lock = threading.RLock()
        self._warned = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_child)

    def _after_fork_child(self):
        # Locks a parent thread held at fork time would never be released.
        self._lock = threading.RLock()
        self.registry.reset_after_fork()
        self.link.reset_after_fork()
        self.triton.reset_after_fork()
        _importhook.reset_after_fork()

    # -- activation ------------------------------------------------------------

    def install(self, agent=None, mode="auto"):
        with self._lock:
            if agent is not None:
                self.link.set_override(_explicit_agent(agent), where=str(agent))
            self.mode = mode
            self.enabled = True
            _importhook.when_imported(TRITON, self._on_triton_imported)
            _importhook.when_imported(INDUCTOR, self._on_inductor_imported)
            return True

    def uninstall(self):
        with self._lock:
            self.enabled = False
            _importhook.cancel_all()
            tr = sys.modules.get(TRITON)
            if tr is not None:
                try:
                    self.triton.uninstall(tr)
                except Exception as e:  # pylint: disable=broad-except
                    self.registry.note_error("uninstall triton", e)
            if self.inductor is not None:
                try:
                    self.inductor.uninstall()
                except Exception as e:  # pylint: disable=broad-except
                    self.registry.note_error("uninstall inductor", e)
                self.inductor = None

    def _on_triton_imported(self, mod):
        if not self.enabled:
            return
        try:
            self.triton.install(mod, self.mode)
        except Exception as e:  # pylint: disable=broad-except
            self.registry.note_error("install triton hooks", e)
            self.warn("Triton hooks not installed: %s" % e)

    def _on_inductor_imported(self, mod):
        if not self.enabled or self.inductor is not None:
            return
        try:
            from . import _inductor  # pylint: disable=import-outside-toplevel
            hooks = _inductor.InductorHooks(self)
            hooks.install(mod)
            self.inductor = hooks
        except Exception as e:  # pylint: disable=broad-except
            self.registry.note_error("install inductor hooks", e)
            self.warn("Inductor hooks not installed: %s" % e)

    def warn(self, text):
        # At most one line, and only when asked for: the shim lives inside
        # other people's programs.
        if self._warned or not _registry.debug_enabled():
            return
        self._warned = True
        try:
            sys.stderr.write("kerncap_shim: %s\n" % text)
        except Exception:  # pylint: disable=broad-except
            pass

    # -- gating ------------------------------------------------------------------

    def should_record(self):
        """Cheap answer to "is there anyone to hand metadata to?": an agent
        loaded now, or one named by the environment (it loads at cuInit)."""
        if not self.enabled:
            return False
        if self.link.resolve() is not None:
            return True
        return self.link.hinted()

    # -- compile events ------------------------------------------------------------

    def on_listener(self, kw):
        """triton.knobs.compilation.listener(src, metadata, metadata_group,
        times, cache_hit)."""
        if not self.should_record():
            return
        src = kw.get("src")
        md = kw.get("metadata")
        fmt, binary = _record.binary_from_group(kw.get("metadata_group"))
        jit_fn = getattr(src, "fn", None)
        self._record(src, md, fmt, binary, "compilation_listener", kw.get("cache_hit"), jit_fn)

    def on_post_compile(self, kw):
        """triton.knobs.runtime.jit_post_compile_hook: from the JIT
        (fn=JitFunctionInfo, compile=dict) or from Inductor (fn=JITFunction,
        compile=CompiledKernel)."""
        if not self.should_record():
            return
        comp = kw.get("compile")
        fn = kw.get("fn")
        if comp is not None and hasattr(comp, "asm"):
            self.on_compiled_kernel(comp, fn, "jit_post_compile_hook")
            return
        jit_fn = getattr(fn, "jit_function", None) or _record.unwrap_jit(fn)
        if jit_fn is None or not isinstance(comp, dict):
            return
        kernel = None
        try:
            caches = jit_fn.device_caches[comp.get("device", 0)]
            kernel = caches[0].get(kw.get("key"))
        except Exception:  # pylint: disable=broad-except
            kernel = None
        if kernel is None:
            return
        if hasattr(kernel, "result") and not hasattr(kernel, "asm"):
            # Async compile (a future): the listener sees the finished kernel.
            done = getattr(kernel, "done", None)
            if not callable(done) or not done():
                return
            kernel = kernel.result()
        self.on_compiled_kernel(kernel, jit_fn, "jit_post_compile_hook")

    def recover_chosen(self, tuner, name, chosen_json, fkey):
        """Re-records the binary an autotuner chose when the registry no
        longer holds it (evicted while later candidates compiled). The
        chosen config's kernel is found in the JIT function's own cache
        (device_caches: every compiled specialisation and config) by
        matching each cached kernel's record against the config. Compile
        (choice) time only."""
        if not chosen_json or self.registry.has_config(name, chosen_json, fkey):
            return
        jit_fn = _record.unwrap_jit(getattr(tuner, "fn", None))
        caches = getattr(jit_fn, "device_caches", None)
        if not isinstance(caches, dict):
            return
        for entry in list(caches.values()):
            kernel_cache = entry[0] if isinstance(entry, (tuple, list)) and entry else None
            if not isinstance(kernel_cache, dict):
                continue
            for kernel in list(kernel_cache.values()):
                if hasattr(kernel, "result") and not hasattr(kernel, "asm"):
                    done = getattr(kernel, "done", None)
                    if not callable(done) or not done():
                        continue
                    kernel = kernel.result()
                src = getattr(kernel, "src", None)
                fmt, binary = _record.binary_from_asm(getattr(kernel, "asm", None))
                rec = _record.variant_record(src if hasattr(src, "signature") else None,
                                             getattr(kernel, "metadata", None), fmt, binary,
                                             "autotune choice (recovered from the JIT cache)", None, jit_fn)
                if rec.get("name") != name or not _record.config_matches(chosen_json, rec):
                    continue
                rec["compiled_during"] = "autotune benchmark"
                rec["config"] = chosen_json
                func = _record.function_info(jit_fn) if hasattr(jit_fn, "arg_names") else None
                self.registry.add_variant(name, rec, function=func, make_current=False)
                self.registry.stats["recovered_choices"] += 1

    def on_compiled_kernel(self, kernel, jit_fn, via):
        if not self.should_record():
            return
        md = getattr(kernel, "metadata", None)
        mdd = _record.metadata_dict(md)
        name = mdd.get("name") or getattr(kernel, "name", None)
        h = mdd.get("hash") or getattr(kernel, "hash", None)
        if name and h:
            known = self.registry.variant_by_hash(str(name), h)
            if known is not None and (known.get("binary") or {}).get("sha256"):
                return  # the listener has it already
        src = getattr(kernel, "src", None)
        fmt, binary = _record.binary_from_asm(getattr(kernel, "asm", None))
        if jit_fn is None:
            jit_fn = getattr(src, "fn", None) or getattr(kernel, "fn", None)
        jit_fn = _record.unwrap_jit(jit_fn) or jit_fn
        self._record(src if hasattr(src, "signature") else None, md, fmt, binary, via, None, jit_fn)

    def _record(self, src, md, fmt, binary, via, cache_hit, jit_fn):
        rec = _record.variant_record(src, md, fmt, binary, via, cache_hit, jit_fn)
        name = rec.get("name")
        if not name:
            return
        func = _record.function_info(jit_fn) if jit_fn is not None and hasattr(jit_fn, "arg_names") else None
        fkey = func[0] if func else None
        ctx = _triton.find_context(jit_fn, skip=1)
        autotune = None
        inductor = None
        at = ctx.get("autotuner")
        phase = ctx.get("phase")
        cfg = ctx.get("config")
        if at is not None:
            chosen = getattr(at, "best_config", None) if phase == "run" else None
            autotune = _triton.autotune_snapshot(at, fkey, chosen=chosen, heuristics=ctx.get("heuristics"),
                                                 phase=phase)
            rec["compiled_during"] = {"_bench": "autotune benchmark", "run": "launch",
                                      "warmup": "warmup"}.get(phase, phase)
            self.triton.watch_autotuner(at, name, fkey, ctx.get("heuristics"))
        ind = ctx.get("inductor")
        if ind is not None and self.inductor is not None:
            inductor = self.inductor.describe(ind)
            autotune = self.inductor.autotune_snapshot(ind, fkey, configs_hint=cfg)
        if cfg is not None:
            rec["config"] = _record.config_json(cfg)
        bound = ctx.get("bound_args")
        if bound is not None:
            try:
                rec["compile_args"] = _record.compile_args(bound)
            except Exception as e:  # pylint: disable=broad-except
                self.registry.note_error("compile_args", e)
        self.registry.add_variant(name, rec, function=func, autotune=autotune, inductor=inductor)

    # -- introspection -------------------------------------------------------------

    def status(self):
        tr = sys.modules.get(TRITON)
        agent = self.link.resolve()
        return {
            "enabled": self.enabled,
            "triton": getattr(tr, "__version__", None) if tr is not None else None,
            "triton_hooks": self.triton.mode,
            "inductor_hooks": self.inductor is not None,
            "watching_imports": _importhook.watching(),
            "agent": self.link.where if agent is not None else None,
            "kernels": self.registry.names(),
            "stats": dict(self.registry.stats),
            "errors": list(self.registry.errors),
            "last_result": dict(self.registry.last_result),
        }


def _explicit_agent(agent):
    """install(agent=...): a path of an already-loaded library, a ctypes
    library, or a callable(name_bytes, json_bytes) -> int."""
    if callable(agent) and not hasattr(agent, "_name"):
        return agent
    if hasattr(agent, _agent.SYMBOL):
        fn = getattr(agent, _agent.SYMBOL)
        import ctypes  # pylint: disable=import-outside-toplevel
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        fn.restype = ctypes.c_int
        return fn
    fn = _agent._symbol_from(os.fspath(agent))  # pylint: disable=protected-access
    if fn is None:
        raise OSError("%s is not loaded in this process or lacks %s" % (agent, _agent.SYMBOL))
    return fn


SHIM = Shim()
