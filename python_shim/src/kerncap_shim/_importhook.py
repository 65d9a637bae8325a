"""Run a callback right after a module has been imported, without importing it.

Activation at interpreter start (the .pth file or sitecustomize) must not
import Triton: importing it takes a good fraction of a second and would slow
every Python process started with KERNCAP_TRITON_SHIM=1 (pip, compile
workers, shell helpers). Instead a finder on sys.meta_path watches for the
module's import and wraps its loader, so the callback runs once the module's
code has finished executing. The finder only does a dictionary lookup for
other imports and removes itself once every watched module has appeared.
"""
import sys

# _thread rather than threading: this module is imported at interpreter
# start-up and `threading` alone costs a few milliseconds to import.
import _thread

_lock = _thread.RLock()
_watch = {}  # module name -> [callbacks]
_local = _thread._local()  # pylint: disable=protected-access


def _run(callbacks, module):
    for cb in callbacks:
        try:
            cb(module)
        except Exception:  # pylint: disable=broad-except
            pass  # the callbacks report their own errors


class _LoaderProxy:
    """Delegates to the real loader; runs the callbacks after exec_module."""

    def __init__(self, loader, callbacks):
        self._kc_loader = loader
        self._kc_callbacks = callbacks

    def __getattr__(self, name):
        return getattr(self._kc_loader, name)

    def create_module(self, spec):
        create = getattr(self._kc_loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._kc_loader.exec_module(module)
        # Put the real loader back, so nothing else ever sees this proxy.
        try:
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._kc_loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._kc_loader
        except Exception:  # pylint: disable=broad-except
            pass
        _run(self._kc_callbacks, module)


class _Finder:
    """Consulted first for every import; answers only for watched names."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname not in _watch or getattr(_local, "busy", False):
            return None
        with _lock:
            callbacks = _watch.pop(fullname, None)
            if not _watch:
                _remove_finder()
        if not callbacks:
            return None
        _local.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is _Finder or isinstance(finder, _Finder):
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            _local.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            # Cannot wrap (namespace package, legacy loader): put the watch
            # back and let the import proceed normally.
            with _lock:
                _watch.setdefault(fullname, []).extend(callbacks)
                _add_finder()
            return spec
        spec.loader = _LoaderProxy(spec.loader, callbacks)
        return spec


def _add_finder():
    if _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)


def _remove_finder():
    try:
        while _Finder in sys.meta_path:
            sys.meta_path.remove(_Finder)
    except ValueError:
        pass


def when_imported(name, callback):
    """Calls ``callback(module)`` now if ``name`` is imported already, else
    right after its import completes (once)."""
    with _lock:
        mod = sys.modules.get(name)
        if mod is None:
            _watch.setdefault(name, []).append(callback)
            _add_finder()
            return False
    _run([callback], mod)
    return True


def reset_after_fork():
    global _lock  # pylint: disable=global-statement
    _lock = _thread.RLock()


def cancel_all():
    with _lock:
        _watch.clear()
        _remove_finder()


def watching():
    with _lock:
        return sorted(_watch)
