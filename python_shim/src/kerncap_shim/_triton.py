"""Hooks into Triton: record every compiled kernel, and the autotuner's choice.

Triton >= 3.4 has hooks of its own, used here and chained to whatever the
user (tritonparse, proton, ...) installed before:

* ``triton.knobs.compilation.listener`` is called by ``triton.compile`` for
  every compilation and cache hit, whoever asked for it: the JIT, Inductor's
  CachingAutotuner, ahead-of-time callers. It receives the ASTSource
  (signature, constexprs, specialization attributes, the JITFunction) and the
  metadata, plus the paths of the compiler's outputs, of which the cubin or
  hsaco is read back (read only) to take its SHA-256.
* ``triton.knobs.runtime.jit_post_compile_hook`` is called by the JIT after a
  compile, and by Inductor with the CompiledKernel itself; it is a second
  route in case something replaces the listener after us.

Older releases (2.1 - 3.3) lack these knobs. There the class
``CompiledKernel``'s ``__init__`` is wrapped: it runs once per compiled or
cache-loaded kernel, with the binary in hand. Wrapping ``JITFunction.run`` /
``Autotuner.run`` would also work but would add a Python call to every
launch; nothing here runs per launch.

The autotuner's choice. ``Autotuner.run`` benchmarks every candidate
(compiling each), stores the winner with ``self.cache[key] = config`` and
launches it; no compile happens between choice and launch. When a compile
runs under an Autotuner (found by walking up the Python stack, compile time
only), that instance's ``cache`` dict is swapped for a dict subclass whose
``__setitem__`` reports the choice. Lookups on it (``key in cache``,
``cache[key]``, done per launch) remain the C dict code: no launch-path cost.
"""
import sys
import threading
import weakref

from . import _record

# Frames whose `self` may be an Autotuner/Heuristics/CachingAutotuner.
_MAX_FRAMES = 96


class ChoiceDict(dict):
    """Autotuner.cache replacement reporting the winning config."""

    __slots__ = ("_kc_callback",)

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value)
        cb = getattr(self, "_kc_callback", None)
        if cb is not None:
            try:
                cb(key, value)
            except Exception:  # pylint: disable=broad-except
                pass

    def __reduce__(self):
        # Pickles (and deep-copies) as a plain dict: no dependency on the shim.
        return (dict, (dict(self),))


def _triton_autotuner_classes():
    mod = sys.modules.get("triton.runtime.autotuner")
    if mod is None:
        return None, None
    return getattr(mod, "Autotuner", None), getattr(mod, "Heuristics", None)


def _inductor_class():
    mod = sys.modules.get("torch._inductor.runtime.triton_heuristics")
    return getattr(mod, "CachingAutotuner", None) if mod is not None else None


def find_context(jit_fn, skip=2):
    """What is compiling: the innermost Triton Autotuner (and Heuristics)
    wrapping ``jit_fn``, or Inductor's CachingAutotuner, with the config
    being compiled when the stack says so. Compile time only."""
    autotuner_cls, heur_cls = _triton_autotuner_classes()
    ind_cls = _inductor_class()
    ctx = {}
    if autotuner_cls is None and ind_cls is None:
        return ctx
    try:
        f = sys._getframe(skip)  # pylint: disable=protected-access
    except ValueError:
        return ctx
    n = 0
    while f is not None and n < _MAX_FRAMES:
        n += 1
        co = f.f_code
        if co.co_argcount and co.co_varnames and co.co_varnames[0] == "self":
            slf = f.f_locals.get("self")
            if autotuner_cls is not None and "autotuner" not in ctx and isinstance(slf, autotuner_cls):
                if jit_fn is None or _record.unwrap_jit(getattr(slf, "fn", None)) is jit_fn:
                    ctx["autotuner"] = slf
                    ctx["phase"] = co.co_name
                    if co.co_name == "_bench":
                        ctx["config"] = f.f_locals.get("config")
            elif co.co_name == "run" and "bound_args" not in ctx and jit_fn is not None and slf is jit_fn:
                # JITFunction.run compiling for a launch: the arguments it was
                # called with (their shapes bound the buffers' extents).
                bound = f.f_locals.get("bound_args")
                if isinstance(bound, dict):
                    ctx["bound_args"] = bound
            elif heur_cls is not None and "heuristics" not in ctx and isinstance(slf, heur_cls):
                ctx["heuristics"] = slf
            elif ind_cls is not None and "inductor" not in ctx and isinstance(slf, ind_cls):
                ctx["inductor"] = slf
                if co.co_name == "_precompile_config":
                    ctx["config"] = f.f_locals.get("cfg")
                break
        f = f.f_back
    return ctx


def _config_index(configs, cfg):
    if cfg is None or not configs:
        return None
    for i, c in enumerate(configs):
        if c is cfg:
            return i
    try:
        cj = _record.config_json(cfg)
        for i, c in enumerate(configs):
            if _record.config_json(c) == cj:
                return i
    except Exception:  # pylint: disable=broad-except
        pass
    return None


def autotune_snapshot(at, fkey, chosen=None, key=None, heuristics=None, phase=None):
    """The Triton Autotuner's candidates and (when known) its choice."""
    configs = list(getattr(at, "configs", []) or [])
    snap = {"kind": "triton.Autotuner", "function": fkey}
    keys = getattr(at, "keys", None) or getattr(at, "key_idx", None)
    if keys is not None:
        snap["key_args"] = _record.jsonable(list(keys), 1)
    snap["configs"] = [_record.config_json(c) for c in configs[:512]]
    if len(configs) > 512:
        snap["configs_truncated"] = len(configs)
    if chosen is None and len(configs) == 1:
        chosen = configs[0]  # one candidate: Autotuner.run takes it without tuning
    if chosen is not None:
        snap["chosen"] = _record.config_json(chosen)
        idx = _config_index(configs, chosen)
        if idx is not None:
            snap["chosen_index"] = idx
    if key is not None:
        snap["chosen_for_key"] = _record.jsonable(key, 1)
    cache = getattr(at, "cache", None)
    if isinstance(cache, dict) and cache:
        recent = list(cache.items())[-16:]
        snap["tuning_cache"] = [
            {"key": _record.jsonable(k, 1), "config_index": _config_index(configs, v),
             "config": _record.config_json(v)} for k, v in recent]
    for attr in ("reset_to_zero", "restore_value"):
        v = getattr(at, attr, None)
        if v:
            snap[attr] = _record.jsonable(list(v), 1)
    if getattr(at, "early_config_prune", None) is not None or getattr(at, "perf_model", None) is not None:
        snap["pruned"] = True
    if heuristics is not None:
        vals = getattr(heuristics, "values", None)
        if isinstance(vals, dict):
            snap["heuristics"] = sorted(str(k) for k in vals)
    if phase:
        snap["observed_in"] = phase
    return snap


class TritonHooks:
    """Installs and removes the Triton hooks for one Shim state."""

    def __init__(self, state):
        self.state = state
        self.mode = None  # "knobs" | "legacy"
        self.prev_listener = None
        self.prev_post_hook = None
        self.listener = None
        self.post_hook = None
        self.ck_class = None
        self.ck_orig_init = None
        self._lock = threading.Lock()
        # Autotuners whose cache we swapped (weak: never keep them alive).
        self._tuners = weakref.WeakSet()

    def reset_after_fork(self):
        self._lock = threading.Lock()

    # -- install / uninstall ---------------------------------------------------

    def install(self, triton_mod, mode="auto"):
        with self._lock:
            if self.mode is not None:
                return self.mode
            knobs = getattr(triton_mod, "knobs", None)
            comp = getattr(knobs, "compilation", None)
            rt = getattr(knobs, "runtime", None)
            have_knobs = comp is not None and rt is not None and hasattr(comp, "listener") \
                and hasattr(rt, "jit_post_compile_hook")
            if have_knobs and mode != "legacy":
                self._install_knobs(comp, rt)
                self.mode = "knobs"
            else:
                self._install_legacy()
                self.mode = "legacy"
            return self.mode

    def _install_knobs(self, comp, rt):
        state = self.state
        prev_listener = comp.listener
        prev_post = rt.jit_post_compile_hook

        def kerncap_listener(*args, **kwargs):
            try:
                state.on_listener(kwargs)
            except Exception as e:  # pylint: disable=broad-except
                state.registry.note_error("listener", e)
            if prev_listener is not None:
                return prev_listener(*args, **kwargs)
            return None

        def kerncap_post_compile_hook(*args, **kwargs):
            try:
                state.on_post_compile(kwargs)
            except Exception as e:  # pylint: disable=broad-except
                state.registry.note_error("jit_post_compile_hook", e)
            if prev_post is not None:
                return prev_post(*args, **kwargs)
            return None

        # Inductor inspects the hook's signature to decide whether to pass
        # inductor_args; present the chained hook's, so chaining changes
        # nothing for it (ours takes anything).
        if prev_post is not None:
            try:
                import inspect  # pylint: disable=import-outside-toplevel
                kerncap_post_compile_hook.__signature__ = inspect.signature(prev_post)
            except (TypeError, ValueError):
                pass
        kerncap_listener.kerncap_shim = True
        kerncap_post_compile_hook.kerncap_shim = True
        self.prev_listener, self.prev_post_hook = prev_listener, prev_post
        self.listener, self.post_hook = kerncap_listener, kerncap_post_compile_hook
        comp.listener = kerncap_listener
        rt.jit_post_compile_hook = kerncap_post_compile_hook

    def _install_legacy(self):
        ck = None
        for modname in ("triton.compiler.compiler", "triton.compiler"):
            mod = sys.modules.get(modname)
            ck = getattr(mod, "CompiledKernel", None) if mod is not None else None
            if ck is not None:
                break
        if ck is None:
            raise RuntimeError("triton.compiler.CompiledKernel not found")
        orig = ck.__init__
        if getattr(orig, "kerncap_shim", False):
            return
        state = self.state

        def __init__(self_, *args, **kwargs):  # noqa: N807
            orig(self_, *args, **kwargs)
            try:
                state.on_compiled_kernel(self_, None, "CompiledKernel.__init__")
            except Exception as e:  # pylint: disable=broad-except
                state.registry.note_error("CompiledKernel.__init__", e)

        __init__.kerncap_shim = True
        __init__.__wrapped__ = orig
        __init__.__doc__ = orig.__doc__
        ck.__init__ = __init__
        self.ck_class, self.ck_orig_init = ck, orig

    def uninstall(self, triton_mod):
        with self._lock:
            if self.mode == "knobs":
                knobs = getattr(triton_mod, "knobs", None)
                comp, rt = knobs.compilation, knobs.runtime
                # Restore only what is still ours; a hook installed on top of
                # ours keeps calling ours, which then does nothing (disabled).
                if comp.listener is self.listener:
                    comp.listener = self.prev_listener
                if rt.jit_post_compile_hook is self.post_hook:
                    rt.jit_post_compile_hook = self.prev_post_hook
            elif self.mode == "legacy" and self.ck_class is not None:
                if getattr(self.ck_class.__init__, "kerncap_shim", False):
                    self.ck_class.__init__ = self.ck_orig_init
            for at in list(self._tuners):
                cache = getattr(at, "cache", None)
                if isinstance(cache, ChoiceDict):
                    try:
                        at.cache = dict(cache)
                    except Exception:  # pylint: disable=broad-except
                        pass
            self._tuners.clear()
            self.mode = None

    # -- autotuner choice --------------------------------------------------------

    def watch_autotuner(self, at, name, fkey, heuristics):
        """Swap ``at.cache`` for a ChoiceDict reporting to kernel ``name``."""
        cache = getattr(at, "cache", None)
        if not isinstance(cache, dict):
            return
        state = self.state
        ref = weakref.ref(at)

        def on_choice(key, config):
            tuner = ref()
            if tuner is None or not state.enabled:
                return
            try:
                snap = autotune_snapshot(tuner, fkey, chosen=config, key=key, heuristics=heuristics,
                                         phase="choice")
                # With more candidates than the table keeps, the winner's
                # record may have been evicted while the others compiled:
                # take it again from the JIT's kernel cache, where every
                # benchmarked binary still is.
                state.recover_chosen(tuner, name, snap.get("chosen"), fkey)
                state.registry.set_autotune(name, snap, move_current=True)
            except Exception as e:  # pylint: disable=broad-except
                state.registry.note_error("autotune choice", e)

        if isinstance(cache, ChoiceDict):
            cache._kc_callback = on_choice  # pylint: disable=protected-access
            return
        new = ChoiceDict(cache)
        new._kc_callback = on_choice  # pylint: disable=protected-access
        try:
            at.cache = new
            self._tuners.add(at)
        except Exception:  # pylint: disable=broad-except
            pass

