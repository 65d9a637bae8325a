"""Interpreter start-up activation (KERNCAP_TRITON_SHIM=1).

Imported by kerncap_triton_shim.pth (installed package) or by
_site/sitecustomize.py (PYTHONPATH, nothing installed), in every Python
process that has the variable, child processes included. It must never
break or slow down interpreter start-up:

* nothing heavy is imported here: a post-import hook waits for ``triton``
  and only then loads the rest of the shim and installs the hooks (Triton
  itself is never imported by the shim);
* every failure is swallowed; with KERNCAP_SHIM_DEBUG=1 one line goes to
  stderr.
"""
import os
import sys

_DIR = os.path.dirname(os.path.abspath(__file__))


def enabled_by_env(environ=None):
    env = os.environ if environ is None else environ
    v = env.get("KERNCAP_TRITON_SHIM", "").strip().lower()
    return v not in ("", "0", "false", "no", "off")


def site_dirs():
    """Directories to put on PYTHONPATH for activation without installing."""
    return [os.path.join(_DIR, "_site")]


def _warn(text):
    if os.environ.get("KERNCAP_SHIM_DEBUG", "") not in ("", "0"):
        try:
            sys.stderr.write("kerncap_shim: %s\n" % text)
        except Exception:  # pylint: disable=broad-except
            pass


def _on_triton(_module):
    try:
        from ._state import SHIM  # pylint: disable=import-outside-toplevel
        SHIM.install()
    except BaseException as e:  # pylint: disable=broad-except
        _warn("not activated: %r" % (e,))


def activate():
    try:
        if not enabled_by_env():
            return
        from . import _importhook  # pylint: disable=import-outside-toplevel
        _importhook.when_imported("triton", _on_triton)
    except BaseException as e:  # pylint: disable=broad-except
        _warn("not activated: %r" % (e,))


activate()
