"""kerncap_shim activation without installing the package.

Put this directory on PYTHONPATH and set KERNCAP_TRITON_SHIM=1
(``python -m kerncap_shim env`` prints both); child processes inherit both.
Python imports one ``sitecustomize`` module at start-up, the first on
sys.path, so this one would hide the distribution's (Debian and Ubuntu ship
one): it first runs the sitecustomize it shadows, exactly as site.py would,
then activates the shim. Any failure of ours is swallowed (one line on
stderr with KERNCAP_SHIM_DEBUG=1).
"""


def _kerncap_shim_sitecustomize():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get(__name__)

    # 1. The sitecustomize we shadow, if any.
    try:
        import importlib.machinery
        import importlib.util
        path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    except Exception:  # pylint: disable=broad-except
        spec = None
    if spec is not None and spec.loader is not None and \
            os.path.abspath(spec.origin or "") != os.path.abspath(__file__):
        other = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = other
        try:
            spec.loader.exec_module(other)
        except Exception as err:  # pylint: disable=broad-except
            # What site.py does when sitecustomize fails.
            if sys.flags.verbose:
                sys.excepthook(*sys.exc_info())
            else:
                sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                                 "%s: %s\n" % (err.__class__.__name__, err))
            sys.modules["sitecustomize"] = me

    # 2. The shim (its package is two levels up from here). The flag makes
    # it one attempt (and at most one warning) per process, whether this
    # file or the installed .pth gets there first.
    try:
        v = os.environ.get("KERNCAP_TRITON_SHIM", "").strip().lower()
        if v in ("", "0", "false", "no", "off") or hasattr(sys, "_kerncap_shim_tried"):
            return
        sys._kerncap_shim_tried = True  # pylint: disable=protected-access
        try:
            import kerncap_shim  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
        except ImportError:
            sys.path.append(os.path.dirname(os.path.dirname(here)))
        import kerncap_shim._startup  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except BaseException as e:  # pylint: disable=broad-except
        if os.environ.get("KERNCAP_SHIM_DEBUG", "") not in ("", "0"):
            try:
                sys.stderr.write("kerncap_shim: not activated: %r\n" % (e,))
            except Exception:  # pylint: disable=broad-except
                pass


_kerncap_shim_sitecustomize()
del _kerncap_shim_sitecustomize
