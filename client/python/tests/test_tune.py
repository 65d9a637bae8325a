"""kerncap.tune against a stand-in resident server (fake_serve.py): which
candidates are kept, which are rejected and why, what is written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_serve import write_project, write_server

import kerncap
from kerncap import tune as kt


@pytest.fixture()
def setup(tmpdir_short, monkeypatch):
    monkeypatch.setenv("KERNCAP_REPLAY", write_server(tmpdir_short))
    return write_project(tmpdir_short)


def by_params(doc, **want):
    out = [r for r in doc["results"] if all(r["params"].get(k) == v for k, v in want.items())]
    assert out, (want, doc["results"])
    return out


def test_exhaustive_search_keeps_only_validating_candidates_and_writes_the_best(setup):
    space = {"launch.block": [None, [128], [512], [2048]],
             "flags.maxrregcount": [None, 64],
             "flags.use_fast_math": [False, True]}
    doc = kt.tune(setup, space, iterations=5, warmup=1)
    assert doc["baseline"]["verdict"] == "pass" and doc["baseline"]["median_ms"] == 1.0
    assert doc["evaluated"] == 16
    # maxrregcount=64 at block 128, no fast math: 0.8 * 0.9.
    best = doc["best"]
    assert best["params"] == {"launch.block": [128], "flags.maxrregcount": 64,
                              "flags.use_fast_math": False}, best
    assert best["median_ms"] == pytest.approx(0.72)
    assert best["speedup"] == pytest.approx(1 / 0.72)
    for r in by_params(doc, **{"flags.use_fast_math": True}):
        assert not r["valid"]
    for r in by_params(doc, **{"launch.block": [512]}):
        assert r["verdict"] == "launch_shape_dependent" and "launch shape" in r["reason"]
    for r in by_params(doc, **{"launch.block": [2048]}):
        assert r["verdict"] == "error" and "2048 threads" in r["reason"]
    assert doc["valid"] == 4
    # The best variant, its build command and replay command.
    best_dir = Path(doc["best_dir"])
    build = (best_dir / "build.sh").read_text()
    assert "recompile" in build and "-maxrregcount=64" in build and "-O3 -arch=sm_90" in build
    assert "--block=128" in build and "--code-object=" in build
    assert (best_dir / "best.cubin").read_text().startswith("-O3 -arch=sm_90 -maxrregcount=64")
    assert json.loads((Path(setup) / "tune" / "results.json").read_text())["best"]["index"] == best["index"]
    # One build per distinct compile configuration (launch-only changes reuse it).
    builds = [r["folder"] for r in doc["results"] if r["folder"]]
    assert len(set(builds)) == 4  # (maxrregcount x fast math); a rebuild is not the captured binary


def test_sources_defines_and_substitutions_are_tuned_in_copies(setup, tmpdir_short):
    space = {"define.TILE": [16, 32], "define.NEW_MACRO": [1], "subst.@UNROLL@": ["2", "4"]}
    doc = kt.tune(setup, space, iterations=3, warmup=0)
    assert doc["best"]["params"]["define.TILE"] == 32
    assert doc["best"]["median_ms"] == pytest.approx(0.7)
    built = Path(doc["best"]["code_object"]).read_text()
    assert "#define TILE 32" in built and "#define UNROLL_BY 2" in built
    assert "-DNEW_MACRO=1" in built  # no source defines it: passed on the command line
    # The project's own sources are untouched.
    assert "#define TILE 16" in (Path(setup) / "src" / "tile.h").read_text()
    assert "@UNROLL@" in (Path(setup) / "src" / "tile.h").read_text()


def test_build_failures_and_faults_are_reported_not_fatal(setup):
    space = {"flags.extra": ["", "-bad", "-DFAULT"]}
    doc = kt.tune(setup, space, iterations=2, warmup=0)
    bad = by_params(doc, **{"flags.extra": "-bad"})[0]
    assert bad["verdict"] == "error" and "Unknown option '-bad'" in bad["reason"]
    fault = by_params(doc, **{"flags.extra": "-DFAULT"})[0]
    assert fault["verdict"] == "error" and "faulted" in fault["reason"]
    assert doc["best"]["params"] == {"flags.extra": ""}


def test_bad_spaces_are_refused_with_the_key(setup):
    with pytest.raises(kerncap.InvalidArgument, match="launch.blocks"):
        kt.tune(setup, {"launch.blocks": [[1]]})
    with pytest.raises(kerncap.InvalidArgument, match="triton"):
        kt.tune(setup, {"triton.num_warps": [4]})
    with pytest.raises(kerncap.InvalidArgument, match="non-empty list"):
        kt.tune(setup, {"flags.O": []})
    with pytest.raises(kerncap.NotFound, match="kerncap.json"):
        kt.tune(os.path.dirname(setup), {"flags.O": [3]})


def test_optuna_strategy(setup):
    pytest.importorskip("optuna")
    doc = kt.tune(setup, {"flags.maxrregcount": [None, 64], "launch.block": [None, [128]]},
                  strategy="optuna", trials=8, iterations=2, warmup=0)
    assert doc["best"]["median_ms"] == pytest.approx(0.72)


def test_optuna_missing_is_a_clear_error(setup, monkeypatch):
    import builtins
    real = builtins.__import__

    def no_optuna(name, *a, **k):
        if name == "optuna":
            raise ImportError("no optuna here")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_optuna)
    with pytest.raises(kerncap.FailedPrecondition, match="pip install optuna"):
        kt.tune(setup, {"flags.O": [3]}, strategy="optuna")


def test_the_command_line_prints_a_table(setup):
    r = subprocess.run([sys.executable, "-m", "kerncap.tune", setup, "--space",
                        '{"launch.block": [null, [128]]}', "--iterations", "2"],
                       capture_output=True, text=True, env=os.environ)
    assert r.returncode == 0, r.stderr
    assert "verdict" in r.stdout and "median ms" in r.stdout
    assert "best: #" in r.stdout and "build.sh" in r.stdout
    r = subprocess.run([sys.executable, "-m", "kerncap.tune", setup, "--space", "{bad"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--space" in r.stderr


FAKE_RUN_PY = r'''#!/usr/bin/env python3
import argparse, json, sys
ap = argparse.ArgumentParser()
ap.add_argument("--json", action="store_true")
ap.add_argument("--bench", type=int, default=0)
ap.add_argument("--warmup", type=int, default=0)
ap.add_argument("--allow-other-binary", action="store_true")
ap.add_argument("--config")
ap.add_argument("--grid")
a = ap.parse_args()
cfg = json.loads(a.config) if a.config else {}
open("runs.jsonl", "a").write(json.dumps({"config": cfg, "grid": a.grid,
                                          "allow": a.allow_other_binary}) + "\n")
ms = {64: 0.5, 128: 0.4}.get(cfg.get("BLOCK_M"), 1.0) * (0.9 if cfg.get("num_warps") == 8 else 1)
result = "fail" if cfg.get("BLOCK_M") == 256 else "pass"
print(json.dumps({"result": result, "bench": {"variant": {"median_ms": ms}, "original": {"median_ms": 1.0}}}))
sys.exit(0 if result == "pass" else 1)
'''


def test_triton_projects_are_tuned_through_run_py(tmpdir_short):
    p = Path(tmpdir_short) / "tproj"
    p.mkdir()
    (p / "kerncap.json").write_text(json.dumps({"kind": "triton"}))
    (p / "capture.kcap").write_text("x")
    (p / "run.py").write_text(FAKE_RUN_PY)
    doc = kt.tune(p, {"triton.BLOCK_M": [64, 128, 256], "triton.num_warps": [4, 8]},
                  iterations=5, warmup=1)
    assert doc["best"]["params"] == {"triton.BLOCK_M": 128, "triton.num_warps": 8}
    assert doc["best"]["median_ms"] == pytest.approx(0.36)
    for r in by_params(doc, **{"triton.BLOCK_M": 256}):
        assert not r["valid"] and r["verdict"] == "fail"
    runs = [json.loads(line) for line in (p / "runs.jsonl").read_text().splitlines()]
    assert runs[0]["config"] == {} and all(r["allow"] for r in runs)
    assert "run.py" in (Path(doc["best_dir"]) / "build.sh").read_text()
    with pytest.raises(kerncap.InvalidArgument, match="Triton reproducer is tuned"):
        kt.tune(p, {"flags.O": [3]})
