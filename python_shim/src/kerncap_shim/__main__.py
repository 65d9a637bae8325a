"""python -m kerncap_shim {env,info}

env    prints shell lines that activate the shim for processes started from
       this shell, whether or not the package is installed (PYTHONPATH with
       the package's sitecustomize directory, KERNCAP_TRITON_SHIM=1)
info   where the package is, whether its .pth file is installed, and the
       Triton version this interpreter would hook
"""
import os
import shlex
import sys
import sysconfig


def _pth_locations():
    import site  # pylint: disable=import-outside-toplevel
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    if getattr(site, "ENABLE_USER_SITE", False):
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.exists(os.path.join(d, "kerncap_triton_shim.pth"))]


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "info"
    from . import __version__, _startup  # pylint: disable=import-outside-toplevel
    if cmd == "env":
        dirs = _startup.site_dirs()
        old = os.environ.get("PYTHONPATH", "")
        path = os.pathsep.join(dirs + ([old] if old else []))
        print("export KERNCAP_TRITON_SHIM=1")
        print("export PYTHONPATH=%s" % shlex.quote(path))
        return 0
    if cmd == "info":
        print("kerncap_shim %s at %s" % (__version__, os.path.dirname(os.path.abspath(__file__))))
        found = _pth_locations()
        print(".pth activation file: %s" % (", ".join(found) if found else
                                            "not installed (purelib %s)" % sysconfig.get_paths().get("purelib")))
        print("sitecustomize directory for PYTHONPATH: %s" % _startup.site_dirs()[0])
        print("KERNCAP_TRITON_SHIM=%s" % os.environ.get("KERNCAP_TRITON_SHIM", ""))
        try:
            import triton  # pylint: disable=import-outside-toplevel
            knobs = getattr(triton, "knobs", None)
            hooks = "knobs (listener + jit_post_compile_hook)" if knobs is not None and hasattr(
                getattr(knobs, "compilation", None), "listener") else "legacy (CompiledKernel.__init__)"
            print("triton %s: %s" % (triton.__version__, hooks))
        except Exception as e:  # pylint: disable=broad-except
            print("triton: not importable (%s)" % e)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
