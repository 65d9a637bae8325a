"""Shared fixtures. The package under test is the installed one (the ctest
script pip-installs it into a venv); run from a source tree, src/ is used.

Triton is optional for a few tests and required by most: those skip with the
reason when it cannot be imported. Every test compiles into a private
TRITON_CACHE_DIR, never the user's cache.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
try:
    import kerncap_shim  # noqa: F401
except ImportError:
    sys.path.insert(0, SRC)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

_CACHE = tempfile.mkdtemp(prefix="kc_shim_triton_cache_")
os.environ["TRITON_CACHE_DIR"] = _CACHE
# The agent-lookup environment of whoever runs the tests must not leak in.
for _var in ("CUDA_INJECTION64_PATH", "HSA_TOOLS_LIB", "KERNCAP_SHIM_AGENT", "KERNCAP_TRITON_SHIM",
             "KERNCAP_SHIM_MAX_SOURCE"):
    os.environ.pop(_var, None)


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    shutil.rmtree(_CACHE, ignore_errors=True)


def triton_or_skip():
    try:
        import triton  # noqa: F401  pylint: disable=import-outside-toplevel
        from triton.compiler import ASTSource  # noqa: F401  pylint: disable=import-outside-toplevel
    except Exception as e:  # pylint: disable=broad-except
        pytest.skip("triton is not importable here (%s); install it (pip install triton) to run this test" % e)
    return sys.modules["triton"]


@pytest.fixture
def triton_mod():
    return triton_or_skip()


class Recorder:
    """An agent stand-in: a callable(name bytes, json bytes) -> int."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, data):
        self.calls.append((name.decode(), data))
        return 0

    def docs(self, name=None):
        import json  # pylint: disable=import-outside-toplevel
        return [json.loads(d) for n, d in self.calls if name is None or n == name]

    def last(self, name):
        docs = self.docs(name)
        assert docs, "nothing was handed to the agent for %r (calls: %r)" % (
            name, [n for n, _ in self.calls])
        return docs[-1]


@pytest.fixture
def shim():
    """A clean, uninstalled shim before and after the test."""
    from kerncap_shim import _state  # pylint: disable=import-outside-toplevel
    s = _state.SHIM
    s.uninstall()
    s.registry.clear()
    s.link.reset()
    yield s
    s.uninstall()
    s.registry.clear()
    s.link.reset()
    try:
        import fake_triton_driver  # pylint: disable=import-outside-toplevel
        if "triton" in sys.modules:
            fake_triton_driver.deactivate()
    except Exception:  # pylint: disable=broad-except
        pass


@pytest.fixture
def recorder(shim):  # pylint: disable=redefined-outer-name
    r = Recorder()
    shim.install(agent=r)
    return r


def compile_fake_agent(out_dir, name="libfake_agent.so"):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) to build the fake agent library")
    out = os.path.join(str(out_dir), name)
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out, os.path.join(HERE, "fake_agent.c")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if r.returncode != 0:
        pytest.fail("cc failed: %s" % r.stdout.decode(errors="replace"))
    return out


@pytest.fixture(scope="session")
def fake_agent_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fake_agent")


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def child_env(**extra):
    """Environment for a child interpreter that imports this package the same
    way the tests do."""
    env = dict(os.environ)
    try:
        import kerncap_shim as ks  # pylint: disable=import-outside-toplevel
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ks.__file__)))
    except ImportError:
        pkg_parent = SRC
    paths = [HERE]
    if pkg_parent == SRC:
        paths.append(SRC)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_child(code, env, timeout=240):
    return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, check=False)


def cdll_noload(path):
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None
