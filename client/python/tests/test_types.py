"""The package's static types (PEP 561: py.typed): mypy passes over it with
pyproject.toml's [tool.mypy] configuration (--strict) and catches misuse of
the API in a user's code; the build writes the message stub (_messages.pyi)
for the protocol; py.typed ships in the wheel and the sdist, the stub in the
wheel."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import List

import pytest

import kerncap

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent               # client/python
REPO = PROJECT.parents[1]
MIN_MYPY = (1, 4)                   # `unused-ignore` (the package's ignores use it)
STUB_DISTRIBUTIONS = ("types-protobuf", "types-grpcio")


def _require_mypy() -> None:
    """Skips, saying what is missing, where mypy cannot check the package."""
    try:
        version = importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mypy is not installed in this environment (the pypi combination has it: "
                    "pip install 'kerncap[test]')")
    numbers = tuple(int(x) for x in version.split("+")[0].split(".")[:2] if x.isdigit())
    if numbers < MIN_MYPY:
        pytest.skip(f"mypy {version} is older than {'.'.join(map(str, MIN_MYPY))}")
    missing: List[str] = []
    for dist in STUB_DISTRIBUTIONS:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    if missing:
        pytest.skip(f"mypy is installed but not {', '.join(missing)} (the stubs of the "
                    "package's dependencies; pip install 'kerncap[test]')")


def _mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("MYPYPATH", None)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                           "--cache-dir", os.devnull, *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _stubgen():
    """The source tree's src/kerncap/_stubgen.py (what the build runs)."""
    spec = importlib.util.spec_from_file_location(
        "kerncap_stubgen_under_test", PROJECT / "src" / "kerncap" / "_stubgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stub_for_this_protocol() -> str:
    return _stubgen().stub_text(kerncap.pb.descriptor_set.SerializeToString())


def test_mypy_strict_passes_over_the_package(tmp_path):
    """`mypy` in client/python (pyproject.toml's configuration: strict, over
    src/kerncap less _generated), on a copy of the sources with the message
    stub the build would write."""
    _require_mypy()
    shutil.copy2(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(PROJECT / "src" / "kerncap", tmp_path / "src" / "kerncap",
                    ignore=shutil.ignore_patterns("__pycache__", "*.binpb", "_messages.pyi"))
    (tmp_path / "src" / "kerncap" / "_messages.pyi").write_text(_stub_for_this_protocol())
    r = _mypy("--config-file", str(tmp_path / "pyproject.toml"), cwd=tmp_path)
    assert r.returncode == 0, f"mypy found type errors:\n{r.stdout}{r.stderr}"
    assert "Success" in r.stdout, r.stdout


def test_mypy_checks_a_users_code_against_the_installed_package(tmp_path):
    """The installed package is typed (py.typed, _messages.pyi): mypy accepts
    correct use and names each misuse."""
    _require_mypy()
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""\
        from typing import List
        import kerncap
        from kerncap.capture import MemoryMapRow

        def use(c: kerncap.Client) -> None:
            arm = c.arm(kernel="matmul", match="glob", ttl="5m", per_shape="launch")
            cap = c.wait_for_capture(arm, timeout=60)
            rows: List[MemoryMapRow] = cap.memory_map(as_frame=False)
            print(rows[0]["va_hex"].upper(), cap.to_dict()["regions"][0]["size"] + 1)
            info = c.substitute("matmul", "k.cubin", unchecked=True, format="cubin")
            print(info["substitution_id"].lower(), info["agents"][0]["variant_launches"] + 1)
            req = kerncap.pb.ArmRequest(selector=kerncap.pb.Selector(kernel="matmul"))
            print(req.selector.kernel.upper(), kerncap.pb.NAME_GLOB + 1)
            print(kerncap.message_to_json(req))
        """))
    r = _mypy("--strict", str(good), cwd=tmp_path)
    assert r.returncode == 0, f"{r.stdout}{r.stderr}"
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""\
        import kerncap

        def use(c: kerncap.Client) -> None:
            c.arm(kernel="matmul", match="fuzzy")
            cap = c.capture("cap-1")
            cap.memory_map(as_frame=False)[0]["va_hex"] + 1
            kerncap.pb.ArmRequest(selector="matmul")
            c.export(cap, "out.kcap", progress=lambda done: None)
        """))
    r = _mypy("--strict", str(bad), cwd=tmp_path)
    assert r.returncode == 1, f"{r.stdout}{r.stderr}"
    lines = {int(m.group(1)) for m in (re.match(r"(?:.*/)?bad\.py:(\d+): error:", line)
                                       for line in r.stdout.splitlines()) if m}
    assert lines == {4, 6, 7, 8}, r.stdout


def test_the_build_wrote_the_message_stub_of_this_protocol():
    """The installed _messages.pyi is what _stubgen writes for the installed
    descriptor set, and it declares every message and enum of kerncap.v1."""
    installed = Path(kerncap.__file__).resolve().parent / "_messages.pyi"
    assert installed.is_file(), f"the build wrote no {installed}"
    have = installed.read_text()
    assert have == _stub_for_this_protocol()
    # Every message and enum of the protocol is declared, and Namespace has them.
    for f in kerncap.pb.descriptor_set.file:
        if f.package != "kerncap.v1":
            continue
        for m in f.message_type:
            if not m.options.map_entry:
                assert f"\nclass {m.name}(Message):" in have, m.name
                assert f"    {m.name}: Type[_{m.name}]" in have, m.name
        for e in f.enum_type:
            assert f"    {e.name}: EnumTypeWrapper" in have, e.name


def test_the_rpc_calls_name_their_response_types():
    """Client._unary/_stream take the response class for the type checker;
    each call site names the one the method really returns."""
    import ast

    for module in ("client.py", "aio.py"):
        tree = ast.parse((PROJECT / "src" / "kerncap" / module).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr in ("_unary", "_stream")
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
        assert len(calls) >= 15, module
        for call in calls:
            name = call.args[0].value  # type: ignore[attr-defined]
            response = call.args[2]
            raw = any(k.arg == "raw_response" for k in call.keywords)
            method = kerncap.pb.methods[name]
            if raw:
                assert isinstance(response, ast.Name) and response.id == "bytes", (module, name)
            else:
                assert isinstance(response, ast.Attribute), (module, name)
                assert getattr(kerncap.pb, response.attr) is method.response, (module, name)


def _stage(tmp_path: Path) -> Path:
    """The package laid out as run_tests.sh stages it (an sdist's layout)."""
    stage = tmp_path / "stage"
    stage.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(PROJECT / name, stage / name)
    shutil.copytree(PROJECT / "src", stage / "src",
                    ignore=shutil.ignore_patterns("*.binpb", "_messages.pyi", "__pycache__",
                                                  "*.egg-info"))
    shutil.copytree(REPO / "proto" / "kerncap", stage / "proto" / "kerncap")
    return stage


def _build(stage: Path, kind: str, out: Path) -> Path:
    code = (f"import sys; from setuptools import build_meta; "
            f"print(build_meta.build_{kind}(sys.argv[1]))")
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=stage, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0 and kind == "wheel" and "wheel" in r.stderr and \
            importlib.util.find_spec("wheel") is None:
        pytest.skip(f"this setuptools needs the wheel package to build wheels: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


def test_py_typed_ships_in_the_sdist_and_the_wheel_with_the_message_stub(tmp_path):
    """The sdist has py.typed (and the stub's generator); the wheel built from
    the sources has py.typed and the stub the build wrote."""
    stage = _stage(tmp_path)
    out = tmp_path / "dist"
    out.mkdir()
    sdist = _build(stage, "sdist", out)
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert "src/kerncap/py.typed" in names, sorted(names)
    assert "src/kerncap/_stubgen.py" in names, sorted(names)
    wheel = _build(stage, "wheel", out)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert "kerncap/py.typed" in names, sorted(names)
    assert "kerncap/_messages.pyi" in names, sorted(names)
    assert "kerncap/_generated/kerncap_v1.binpb" in names, sorted(names)


def test_the_installed_package_has_py_typed_and_the_message_stub():
    """What pip installed here (from the wheel it built) is typed."""
    files = {str(f).replace(os.sep, "/") for f in importlib.metadata.files("kerncap") or []}
    assert "kerncap/py.typed" in files, sorted(files)
    assert "kerncap/_messages.pyi" in files, sorted(files)
