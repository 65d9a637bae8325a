"""Activation in child interpreters: the installed .pth file, the
sitecustomize directory on PYTHONPATH (nothing installed), inheritance by
child processes, and that start-up never breaks."""
import json
import os
import site
import sys
import textwrap

import pytest

from conftest import child_env, run_child

PROBE = textwrap.dedent("""
    import json, sys
    pre = {m: m in sys.modules for m in ("kerncap_shim", "kerncap_shim._startup", "kerncap_shim._state", "triton")}
    out = {"pre": pre}
    try:
        import triton
        from kerncap_shim._state import SHIM
        # "knobs" (Triton >= 3.4) or "legacy"; None when not hooked.
        out["hooked"] = SHIM.triton.mode
        knobs = getattr(triton, "knobs", None)
        if knobs is not None and SHIM.triton.mode == "knobs":
            assert getattr(knobs.compilation.listener, "kerncap_shim", False)
            assert getattr(knobs.runtime.jit_post_compile_hook, "kerncap_shim", False)
    except ImportError as e:
        out["triton"] = str(e)
    sc = sys.modules.get("sitecustomize")
    out["sitecustomize"] = getattr(sc, "__file__", None)
    out["distro_marker"] = getattr(sys, "kc_distro_sitecustomize", False)
    print(json.dumps(out))
""")


def _pth_dir():
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    for d in dirs:
        if os.path.exists(os.path.join(d, "kerncap_triton_shim.pth")):
            return d
    return None


def _site_dir():
    import kerncap_shim._startup as st
    return st.site_dirs()[0]


def _probe(env):
    r = run_child(PROBE, env)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode().strip().splitlines()[-1]), r.stderr.decode()


def _triton_or_skip():
    pytest.importorskip("triton", reason="triton is not installed")


def test_pth_activates_lazily():
    _triton_or_skip()
    if _pth_dir() is None:
        pytest.skip("kerncap_triton_shim.pth is not installed for %s (pip install the package to test it)"
                    % sys.executable)
    out, err = _probe(child_env(KERNCAP_TRITON_SHIM="1"))
    # Start-up only registered an import hook; nothing heavy was imported.
    assert out["pre"] == {"kerncap_shim": True, "kerncap_shim._startup": True, "kerncap_shim._state": False,
                          "triton": False}
    assert out["hooked"] in ("knobs", "legacy"), (out, err)
    assert err == ""


@pytest.mark.parametrize("value", [None, "", "0", "off"])
def test_pth_inactive_without_variable(value):
    _triton_or_skip()
    if _pth_dir() is None:
        pytest.skip("kerncap_triton_shim.pth is not installed for %s" % sys.executable)
    out, err = _probe(child_env(KERNCAP_TRITON_SHIM=value))
    # The .pth line itself only tests for unset/""/"0"; other "off" values
    # are recognised by _startup, which then registers nothing.
    assert out["pre"]["kerncap_shim._startup"] is (value == "off")
    assert out["pre"]["kerncap_shim._state"] is False
    assert out["hooked"] is None
    assert err == ""


def _broken_package(tmp_path):
    d = tmp_path / "broken"
    (d / "kerncap_shim").mkdir(parents=True)
    (d / "kerncap_shim" / "__init__.py").write_text("raise RuntimeError('boom: broken on purpose')\n")
    return str(d)


@pytest.mark.parametrize("route", ["pth", "sitecustomize"])
@pytest.mark.parametrize("debug", [False, True])
def test_startup_never_breaks(tmp_path, route, debug):
    broken = _broken_package(tmp_path)
    if route == "pth":
        if _pth_dir() is None:
            pytest.skip("kerncap_triton_shim.pth is not installed for %s" % sys.executable)
        path = broken
    else:
        path = os.pathsep.join([_site_dir(), broken])
    env = child_env(KERNCAP_TRITON_SHIM="1", KERNCAP_SHIM_DEBUG="1" if debug else None)
    env["PYTHONPATH"] = path
    r = run_child("print('alive')", env)
    assert r.returncode == 0 and r.stdout.decode().strip() == "alive"
    lines = [ln for ln in r.stderr.decode().splitlines() if ln.strip()]
    if debug:
        assert len(lines) == 1 and lines[0].startswith("kerncap_shim: not activated:") and "boom" in lines[0], lines
    else:
        assert lines == []


def test_sitecustomize_route_chains_the_shadowed_one(tmp_path):
    _triton_or_skip()
    distro = tmp_path / "distro"
    distro.mkdir()
    (distro / "sitecustomize.py").write_text("import sys\nsys.kc_distro_sitecustomize = True\n")
    env = child_env(KERNCAP_TRITON_SHIM="1")
    env["PYTHONPATH"] = os.pathsep.join([_site_dir(), str(distro), env.get("PYTHONPATH", "")])
    out, err = _probe(env)
    assert out["distro_marker"] is True
    assert out["sitecustomize"] == str(distro / "sitecustomize.py")
    assert out["hooked"] in ("knobs", "legacy"), (out, err)
    assert err == ""


def test_sitecustomize_route_reports_shadowed_failure_like_site(tmp_path):
    _triton_or_skip()
    distro = tmp_path / "distro"
    distro.mkdir()
    (distro / "sitecustomize.py").write_text("raise ValueError('distro broken')\n")
    env = child_env(KERNCAP_TRITON_SHIM="1")
    env["PYTHONPATH"] = os.pathsep.join([_site_dir(), str(distro), env.get("PYTHONPATH", "")])
    out, err = _probe(env)
    assert "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nValueError: distro broken" in err
    assert out["hooked"] in ("knobs", "legacy")


def test_env_for_subprocess_and_inheritance():
    """env_for_subprocess() activates a child without the .pth; that
    child's own children (multiprocessing spawn) are active too."""
    _triton_or_skip()
    import kerncap_shim
    env = kerncap_shim.env_for_subprocess(child_env())
    code = textwrap.dedent("""
        import json, multiprocessing as mp

        def hooked():
            import triton
            from kerncap_shim._state import SHIM
            return SHIM.triton.mode is not None

        def probe(q):
            q.put(hooked())

        if __name__ == "__main__":
            mine = hooked()
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=probe, args=(q,))
            p.start()
            child = q.get(timeout=120)
            p.join(60)
            print(json.dumps({"mine": mine, "child": child}))
    """)
    script = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kc_shim_spawn_probe_%d.py" % os.getpid())
    with open(script, "w") as f:
        f.write(code)
    try:
        import subprocess
        r = subprocess.run([sys.executable, script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=240, check=False)
    finally:
        os.unlink(script)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout.decode().strip().splitlines()[-1]) == {"mine": True, "child": True}
