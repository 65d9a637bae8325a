"""Finding the kerncap agent already loaded in this process, and calling it.

The agent (libkerncap_agent.so for CUDA, libkerncap_agent_hsa.so for HSA)
exports ``int kerncap_agent_set_jit_metadata(const char* kernel_name,
const char* json)``: 0 ok, 1 bad arguments, 2 JSON larger than 1 MiB, 3 out
of memory. The shim must reach the copy the application runs with, never
load a second one (a second copy would have its own, empty registry and,
worse, run its constructor and subscribe to CUPTI again). So every lookup
uses ``dlopen(path, RTLD_NOLOAD)``, which only returns a handle when the
library is mapped already, in this order:

1. ``$KERNCAP_SHIM_AGENT`` (an explicit path, for unusual set-ups and tests);
2. ``$CUDA_INJECTION64_PATH`` (the driver dlopen()s it during cuInit,
   RTLD_LOCAL, so the symbol is not global: a path lookup is required);
3. ``$LD_PRELOAD`` entries and ``$HSA_TOOLS_LIB`` entries;
4. any mapping in /proc/self/maps whose file name starts with
   ``libkerncap_agent`` (covers relative paths, symlinks, dlopen by hand);
5. the global symbol table (``dlsym(RTLD_DEFAULT, ...)``).

A negative answer is not cached for long: with CUDA_INJECTION64_PATH the
agent appears only when the application first initialises CUDA, which is
normally before Triton's first compile but not always (ahead-of-time
``triton.compile`` calls). Lookups happen at compile time only.
"""
import ctypes
import os
import threading
import time

SYMBOL = "kerncap_agent_set_jit_metadata"
# Environment variables that can name the agent library.
_PATH_VARS = ("KERNCAP_SHIM_AGENT", "CUDA_INJECTION64_PATH", "LD_PRELOAD", "HSA_TOOLS_LIB")
# /proc/self/maps is read at most this often while no agent is found: it is
# the one lookup whose cost grows with the process (torch maps ~1000 files).
_MAPS_RECHECK_S = 1.0

RESULT_TEXT = {0: "ok", 1: "bad arguments", 2: "json larger than 1 MiB", 3: "out of memory"}


def _rtld_noload():
    # RTLD_NOLOAD needs one of RTLD_LAZY/RTLD_NOW as well, or glibc refuses
    # the mode ("invalid mode for dlopen()").
    return getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LAZY", 1)


def _split_paths(value):
    # LD_PRELOAD takes ':' or whitespace separators; HSA_TOOLS_LIB takes
    # whitespace. Either way an entry never contains both.
    out = []
    for part in value.replace(":", " ").split():
        if part:
            out.append(part)
    return out


def env_hints(environ=None):
    """Library paths that the environment names as possibly the agent."""
    env = os.environ if environ is None else environ
    paths = []
    for var in _PATH_VARS:
        value = env.get(var, "")
        if not value:
            continue
        if var in ("CUDA_INJECTION64_PATH", "KERNCAP_SHIM_AGENT"):
            paths.append(value.strip())
        else:
            paths.extend(_split_paths(value))
    return [p for p in paths if p]


def _maps_candidates():
    try:
        with open("/proc/self/maps", "rb") as f:
            data = f.read()
    except OSError:
        return []
    out = []
    seen = set()
    for line in data.split(b"\n"):
        idx = line.find(b"/")
        if idx < 0:
            continue
        path = line[idx:]
        base = path.rsplit(b"/", 1)[-1]
        if base.startswith(b"libkerncap_agent") and path not in seen:
            seen.add(path)
            out.append(os.fsdecode(path))
    return out


def _symbol_from(handle_path):
    """The setter from an already-loaded library at ``handle_path``, or None."""
    try:
        lib = ctypes.CDLL(handle_path, mode=_rtld_noload())
    except OSError:
        return None  # not loaded (or not a library): never load it ourselves
    try:
        fn = getattr(lib, SYMBOL)
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    fn.restype = ctypes.c_int
    return fn


def _global_symbol():
    try:
        fn = getattr(ctypes.CDLL(None), SYMBOL)
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    fn.restype = ctypes.c_int
    return fn


class AgentLink:
    """The agent's setter, resolved lazily; thread-safe.

    ``override`` (a callable taking (bytes, bytes) and returning an int)
    replaces the lookup: tests and ``install(agent=...)`` use it.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._fn = None
        self._where = ""
        self._override = None
        self._last_maps_check = 0.0

    def set_override(self, fn, where="explicit"):
        with self._lock:
            self._override = fn
            self._fn = None
            self._where = where if fn is not None else ""

    def reset_after_fork(self):
        self._lock = threading.Lock()

    def reset(self):
        with self._lock:
            self._fn = None
            self._where = ""
            self._override = None
            self._last_maps_check = 0.0

    @property
    def where(self):
        return self._where

    def hinted(self):
        """True when an agent is loaded or the environment says one may be."""
        return self._override is not None or self._fn is not None or bool(env_hints())

    def resolve(self):
        """The setter, or None when no agent is loaded in this process."""
        fn = self._fn
        if fn is not None:
            return fn
        with self._lock:
            if self._override is not None:
                return self._override
            if self._fn is not None:
                return self._fn
            for path in env_hints():
                fn = _symbol_from(path)
                if fn is not None:
                    self._fn, self._where = fn, path
                    return fn
            now = time.monotonic()
            if now - self._last_maps_check >= _MAPS_RECHECK_S or self._last_maps_check == 0.0:
                self._last_maps_check = now
                for path in _maps_candidates():
                    fn = _symbol_from(path)
                    if fn is not None:
                        self._fn, self._where = fn, path
                        return fn
                fn = _global_symbol()
                if fn is not None:
                    self._fn, self._where = fn, "global symbol table"
                    return fn
        return None

    def send(self, kernel_name, json_bytes):
        """Hands one document to the agent. Returns the agent's code, or None
        when there is no agent."""
        fn = self.resolve()
        if fn is None:
            return None
        name = kernel_name.encode("utf-8") if isinstance(kernel_name, str) else kernel_name
        return int(fn(name, json_bytes))
