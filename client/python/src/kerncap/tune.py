"""kerncap.tune: search a tuning space for a captured kernel in its reproducer.

    python -m kerncap.tune PROJECT --space space.json [--strategy exhaustive|optuna]
                           [--trials N] [--iterations 20] [--warmup 3] [--out DIR] [--json]

or from Python: ``kerncap.tune.tune("matmul", {"launch.block": [[128], [256]]})``.

PROJECT is a reproducer folder (``kerncapctl repro``: kerncap.json, capture.kcap,
Makefile). The space maps parameters to the values to try:

    {"launch.grid": [[64], [128]],            launch overrides, as the resident
     "launch.block": [[128], [256], "16x16"],  mode's "launch" object: grid, block,
     "launch.shared_mem_bytes": [0, 4096],     shared_mem_bytes, max_dynamic_shared_mem,
     "launch.cache_preference": ["l1"],        cache_preference, cluster
     "flags.maxrregcount": [null, 32, 64],     -maxrregcount=N (null: leave out)
     "flags.O": [2, 3],                        -ON (nvcc)
     "flags.use_fast_math": [false, true],     --use_fast_math
     "flags.extra_device_vectorization": [false, true],
     "flags.xptxas": ["", "-O3"],              -Xptxas=VALUE
     "flags.extra": ["", "-lineinfo"],         any nvcc words
     "define.TILE": [16, 32],                  #define TILE in the sources (rewritten
                                               in a copy), else -DTILE=VALUE
     "subst.@UNROLL@": ["2", "4"],             literal text replaced in the copied sources
                                               (template arguments, constants)
     "triton.BLOCK_M": [64, 128],              Triton projects: the config passed to
     "triton.num_warps": [4, 8]}               run.py --config

Every candidate is built in its own copy of the project (OUT/cNNN; the capture is
linked, not copied) with the project's own recompile rule and the flags
appended, then evaluated in ONE resident replay (``kerncap-replay serve``: the
capture is restored once) at its launch configuration. Only candidates whose
every verdict is "pass" are kept; the others are listed with the reason
(a failed validation, "launch_shape_dependent" -- the captured code object fails
at that launch too, so the captured outputs cannot judge it --, a build error,
a launch the kernel cannot run, a fault). The baseline is the captured code
object at the captured launch; speedup = its median / the candidate's.

Results: a table on stdout (``--json``: one document), OUT/results.json, and
OUT/best/ with the best variant's code object, its folder and build.sh (the
build command and the replay command with its launch flags).

Triton projects (kerncap.json "kind": "triton") evaluate each candidate with
``python run.py --config ... --bench N --json --allow-other-binary`` (one
process, and one restore, per candidate: run.py launches the kernel itself).

Strategies: "exhaustive" (every combination) or "optuna" (optional import:
``pip install optuna``; TPE over the same values, --trials of them).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import (TYPE_CHECKING, Callable, Dict, Iterable, List, Mapping, Optional, Sequence,
                    Tuple, TypedDict, Union, cast)

from . import errors
from ._types import PathLike
from .models import ProjectManifest
from .resident import ResidentServer, ServeError, verdict

if TYPE_CHECKING:
    import optuna

# The space: parameter -> the values to try. The values are the user's (any
# JSON value); each parameter reads its own kind (a number, a bool, a text,
# a list of dimensions, null).
Space = Mapping[str, Sequence[object]]
# One candidate: parameter -> the value it takes.
Candidate = Dict[str, object]
CompileKey = Tuple[Tuple[str, str], ...]
_Number = Union[int, float, str]  # flags.O, flags.maxrregcount: int() of the value


class ResultJSON(TypedDict):
    """Result.to_json(): one evaluated candidate in results.json."""
    index: int
    params: Candidate
    verdict: str
    valid: bool
    median_ms: Optional[float]
    speedup: Optional[float]
    reason: str
    code_object: str
    folder: str
    build_command: str


class _TuneResults(TypedDict):
    project: str
    strategy: str
    baseline: ResultJSON
    results: List[ResultJSON]
    best: Optional[ResultJSON]
    best_dir: Optional[str]
    valid: int
    evaluated: int


class TuneReport(_TuneResults, total=False):
    """What tune() returns: OUT/results.json's document, and the table."""
    table: str  # always there: format_table() of the results


class _TritonBench(TypedDict, total=False):
    median_ms: float


class _TritonRun(TypedDict, total=False):
    """`python run.py --json --bench N`'s document (the keys read here)."""
    result: str  # "pass", "fail", ...
    error: str
    bench: Dict[str, _TritonBench]  # "variant": its timing

LAUNCH_KEYS = ("grid", "block", "shared_mem_bytes", "max_dynamic_shared_mem", "cache_preference",
               "cluster")
FLAG_KEYS = ("maxrregcount", "O", "use_fast_math", "extra_device_vectorization", "xptxas",
             "extra")
SKIP_DIRS = {"build", "tune", ".git"}


@dataclass
class Result:
    index: int
    params: Candidate
    verdict: str = "error"          # pass | fail | incomplete | launch_shape_dependent | error
    median_ms: Optional[float] = None
    speedup: Optional[float] = None
    reason: str = ""
    code_object: str = ""
    folder: str = ""
    build_command: str = ""
    answer: Mapping[str, object] = field(default_factory=dict)  # the evaluation's answer

    @property
    def valid(self) -> bool:
        return self.verdict == "pass" and self.median_ms is not None

    def to_json(self) -> ResultJSON:
        return {"index": self.index, "params": self.params, "verdict": self.verdict,
                "valid": self.valid, "median_ms": self.median_ms, "speedup": self.speedup,
                "reason": self.reason, "code_object": self.code_object, "folder": self.folder,
                "build_command": self.build_command}


# ---- the space ----

def check_space(space: Space, triton: bool) -> None:
    """InvalidArgument naming the first parameter that is not understood."""
    if not isinstance(space, dict) or not space:
        raise errors.InvalidArgument("the space must be a non-empty object of parameter: [values]")
    for key, values in space.items():
        if not isinstance(values, list) or not values:
            raise errors.InvalidArgument(f"space[{key!r}]: expected a non-empty list of values")
        group, _, name = key.partition(".")
        if not name:
            raise errors.InvalidArgument(f"space key {key!r}: expected GROUP.NAME "
                                         "(launch., flags., define., subst., triton.)")
        if group == "launch" and name not in LAUNCH_KEYS:
            raise errors.InvalidArgument(f"space key {key!r}: launch parameters are {', '.join(LAUNCH_KEYS)}")
        if group == "flags" and name not in FLAG_KEYS:
            raise errors.InvalidArgument(f"space key {key!r}: flags are {', '.join(FLAG_KEYS)}")
        if group == "define" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise errors.InvalidArgument(f"space key {key!r}: not a macro name")
        if group == "triton" and not triton:
            raise errors.InvalidArgument(f"space key {key!r}: triton. parameters need a Triton "
                                         "reproducer (kerncap.json kind \"triton\")")
        if triton and group in ("flags", "define", "subst"):
            raise errors.InvalidArgument(f"space key {key!r}: a Triton reproducer is tuned through "
                                         "triton. (config) and launch.grid only")
        if group not in ("launch", "flags", "define", "subst", "triton"):
            raise errors.InvalidArgument(f"space key {key!r}: unknown group {group!r}")


def exhaustive(space: Space) -> Iterable[Candidate]:
    keys = list(space)
    for combo in itertools.product(*(space[k] for k in keys)):
        yield dict(zip(keys, combo))


def flag_words(params: Candidate) -> List[str]:
    """The nvcc words the flags. and define. parameters add."""
    words: List[str] = []
    for key, v in params.items():
        group, _, name = key.partition(".")
        if group != "flags" or v is None or v is False or v == "":
            continue
        if name == "maxrregcount":
            words.append(f"-maxrregcount={int(cast(_Number, v))}")
        elif name == "O":
            words.append(f"-O{int(cast(_Number, v))}")
        elif name == "use_fast_math":
            words.append("--use_fast_math")
        elif name == "extra_device_vectorization":
            words.append("--extra-device-vectorization")
        elif name == "xptxas":
            words.append(f"-Xptxas={v}")
        elif name == "extra":
            words.extend(shlex.split(str(v)))
    return words


def launch_of(params: Candidate) -> Dict[str, object]:
    return {k.partition(".")[2]: v for k, v in params.items()
            if k.startswith("launch.") and v is not None}


def compile_key(params: Candidate) -> CompileKey:
    return tuple(sorted((k, json.dumps(v)) for k, v in params.items()
                        if k.partition(".")[0] in ("flags", "define", "subst")))


def launch_flags(launch: Mapping[str, object]) -> List[str]:
    """kerncap-replay's flags for a launch object."""
    names = {"grid": "--grid", "block": "--block", "cluster": "--cluster",
             "shared_mem_bytes": "--shared-mem", "max_dynamic_shared_mem": "--max-dynamic-shared-mem",
             "cache_preference": "--cache-preference"}
    out = []
    for k, v in launch.items():
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        out.append(f"{names[k]}={v}")
    return out


# ---- the project ----

class Project:
    def __init__(self, path: PathLike) -> None:
        self.path = Path(path).resolve()
        mf = self.path / "kerncap.json"
        if not mf.is_file():
            raise errors.NotFound(f"{self.path} is not a reproducer folder (no kerncap.json; "
                                  "kerncapctl repro CAPTURE --out DIR makes one)")
        try:
            self.manifest = cast(ProjectManifest, json.loads(mf.read_text()))
        except ValueError as e:
            raise errors.InvalidArgument(f"{mf}: not JSON: {e}") from e
        self.kind = self.manifest.get("kind", "")
        self.triton = self.kind == "triton"
        self.capture = self.path / "capture.kcap"
        if not self.capture.is_file():
            raise errors.NotFound(f"{self.capture} is missing")
        co = (self.manifest.get("code_object") or {}).get("file")
        self.captured_code = self.path / co if co else None

    def make_var(self, folder: Path, name: str) -> str:
        """What make thinks $(NAME) is in `folder`'s Makefile."""
        r = subprocess.run(["make", "-s", "-C", str(folder), "--no-print-directory",
                            f"--eval=kc-print-var: ; @echo $({name})", "kc-print-var"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise errors.FailedPrecondition(f"make in {folder} could not print {name}: {r.stderr.strip()}")
        return r.stdout.strip()

    def copy_to(self, folder: Path) -> None:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for entry in self.path.iterdir():
            if entry.name in SKIP_DIRS or entry.name.startswith("serve."):
                continue
            dst = folder / entry.name
            if entry.name == "capture.kcap":
                dst.symlink_to(entry)
            elif entry.is_dir():
                shutil.copytree(entry, dst, symlinks=True)
            else:
                shutil.copy2(entry, dst)


def apply_source_edits(folder: Path, params: Candidate) -> List[str]:
    """Rewrites #define lines and substitutes text in folder/src; returns the
    -D words for macros no source defines."""
    defines = {k.partition(".")[2]: v for k, v in params.items() if k.startswith("define.")}
    substs = {k.partition(".")[2]: v for k, v in params.items() if k.startswith("subst.")}
    found = set()
    src = folder / "src"
    files = [p for p in src.rglob("*") if p.is_file()] if src.is_dir() else []
    for p in files:
        try:
            text = p.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        new = text
        for name, v in defines.items():
            pat = re.compile(r"^([ \t]*#[ \t]*define[ \t]+" + re.escape(name) + r")\b[^\n]*$", re.M)
            if pat.search(new):
                found.add(name)
                new = pat.sub(lambda m: f"{m.group(1)} {v}", new)
        for token, v in substs.items():
            if token in new:
                found.add("subst." + token)
                new = new.replace(token, str(v))
        if new != text:
            p.write_text(new)
    missing = [t for t in substs if "subst." + t not in found]
    if missing:
        raise errors.InvalidArgument(f"subst.{missing[0]}: the text is in no file under src/")
    return [f"-D{n}={v}" for n, v in defines.items() if n not in found]


# ---- evaluation ----

class Tuner:
    def __init__(self, project: Project, out: Path, iterations: int, warmup: int,
                 server_factory: Optional[Callable[[], ResidentServer]] = None,
                 log: Callable[[str], None] = lambda s: None) -> None:
        self.p = project
        self.out = out
        self.iterations = iterations
        self.warmup = warmup
        self.log = log
        self._factory = server_factory or (lambda: ResidentServer.start(self.p.capture, cwd=self.p.path))
        self._server: Optional[ResidentServer] = None
        # key -> (code, folder, cmd, error)
        self._builds: Dict[CompileKey, Tuple[str, str, str, str]] = {}
        self.baseline_ms: Optional[float] = None
        self.results: List[Result] = []
        self._orig_flags: Optional[str] = None

    def server(self) -> ResidentServer:
        if self._server is None:
            self._server = self._factory()
        return self._server

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def build(self, params: Candidate, index: int) -> Tuple[str, str, str, str]:
        key = compile_key(params)
        if not key:
            if self.p.captured_code is None or not self.p.captured_code.is_file():
                return "", "", "", "kerncap.json names no captured code object file"
            return str(self.p.captured_code), "", "", ""
        if key in self._builds:
            return self._builds[key]
        folder = self.out / f"c{index:03d}"
        self.p.copy_to(folder)
        try:
            words = apply_source_edits(folder, params) + flag_words(params)
        except errors.InvalidArgument as e:
            res = ("", str(folder), "", str(e))
            self._builds[key] = res
            return res
        if self._orig_flags is None:
            self._orig_flags = self.p.make_var(self.p.path, "FLAGS")
        flags = " ".join([self._orig_flags] + [shlex.quote(w) for w in words]).strip()
        cmd = ["make", "-C", str(folder), "recompile", f"FLAGS={flags}"]
        shown = " ".join(shlex.quote(c) for c in cmd)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
            res = ("", str(folder), shown, "build failed: " + " | ".join(tail))
        else:
            built = self.p.make_var(folder, "BUILT_CODE")
            code = folder / built
            res = (str(code), str(folder), shown,
                   "" if code.is_file() else f"the build made no {built}")
        self._builds[key] = res
        return res

    def evaluate(self, params: Candidate) -> Result:
        res = Result(index=len(self.results), params=params)
        self.results.append(res)
        if self.p.triton:
            return self._evaluate_triton(res)
        code, folder, cmd, err = self.build(params, res.index)
        res.code_object, res.folder, res.build_command = code, folder, cmd
        if err:
            res.reason = err
            return res
        launch = launch_of(params)
        try:
            a = self.server().evaluate(code, launch=launch or None, iterations=self.iterations,
                                       warmup=self.warmup)
        except ServeError as e:
            res.reason = str(e)
            if e.context_lost:
                res.reason = "the candidate faulted (the server restarts): " + str(e)
                self._server = None
            return res
        res.answer = a
        res.verdict = verdict(a)
        ms = (a.get("kernel_ms") or {}).get("median")
        res.median_ms = float(ms) if isinstance(ms, (int, float)) else None
        if res.verdict == "launch_shape_dependent":
            res.reason = ("the captured code object fails at this launch too: the output depends "
                          "on the launch shape, the captured outputs cannot judge it")
        elif res.verdict != "pass":
            res.reason = f"validation: {res.verdict}"
        self._speedup(res)
        return res

    def _evaluate_triton(self, res: Result) -> Result:
        config = {k.partition(".")[2]: v for k, v in res.params.items() if k.startswith("triton.")}
        cmd = [sys.executable, str(self.p.path / "run.py"), "--json", "--bench", str(self.iterations),
               "--warmup", str(self.warmup), "--allow-other-binary"]
        if config:
            cmd += ["--config", json.dumps(config)]
        grid = launch_of(res.params).get("grid")
        if grid is not None:
            cmd += ["--grid", ",".join(str(x) for x in grid) if isinstance(grid, list) else str(grid)]
        res.build_command = " ".join(shlex.quote(c) for c in cmd)
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.p.path)
        try:
            doc = cast(_TritonRun, json.loads(r.stdout))
        except ValueError:
            res.reason = f"run.py exited with {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
            return res
        res.answer = doc
        res.verdict = "pass" if doc.get("result") == "pass" else (doc.get("result") or "fail")
        ms = ((doc.get("bench") or {}).get("variant") or {}).get("median_ms")
        res.median_ms = float(ms) if isinstance(ms, (int, float)) else None
        if res.verdict != "pass":
            res.reason = doc.get("error") or f"run.py: {res.verdict}"
        self._speedup(res)
        return res

    def _speedup(self, res: Result) -> None:
        if self.baseline_ms and res.median_ms:
            res.speedup = self.baseline_ms / res.median_ms

    def run_baseline(self) -> Result:
        """The captured code object at the captured launch."""
        r = self.evaluate({})
        r.params = {"baseline": "captured code object, captured launch"}
        if r.valid:
            self.baseline_ms = r.median_ms
            r.speedup = 1.0
        return r


def best_of(results: List[Result]) -> Optional[Result]:
    valid = [r for r in results if r.valid and "baseline" not in r.params]
    return min(valid, key=lambda r: cast(float, r.median_ms)) if valid else None


def write_best(tuner: Tuner, best: Result) -> Path:
    """OUT/best: the variant's folder (or code object), build.sh, result.json."""
    dst = tuner.out / "best"
    if dst.exists():
        shutil.rmtree(dst)
    if best.folder:
        shutil.copytree(best.folder, dst, symlinks=True)
    else:
        dst.mkdir(parents=True)
    if best.code_object and os.path.isfile(best.code_object):
        shutil.copy2(best.code_object, dst / ("best" + Path(best.code_object).suffix))
    launch = launch_of(best.params)
    lines = ["#!/bin/sh", "# kerncap tune: the best valid candidate " + json.dumps(best.params),
             "set -e"]
    if tuner.p.triton:
        lines.append(best.build_command)
    else:
        if best.build_command:
            lines.append(best.build_command.replace(shlex.quote(best.folder), '"$(dirname "$0")"'))
        code = (f'"$(dirname "$0")"/{os.path.relpath(best.code_object, best.folder)}'
                if best.folder else shlex.quote(best.code_object))
        lines.append(" ".join(["kerncap-replay", "validate",
                               shlex.quote(str(tuner.p.capture)), f"--code-object={code}"]
                              + launch_flags(launch)))
    (dst / "build.sh").write_text("\n".join(lines) + "\n")
    os.chmod(dst / "build.sh", 0o755)
    (dst / "result.json").write_text(json.dumps(best.to_json(), indent=2))
    return dst


def format_table(results: List[Result]) -> str:
    rows = [("#", "verdict", "median ms", "speedup", "parameters / reason")]
    for r in results:
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in r.params.items()) or "-"
        rows.append((str(r.index), r.verdict,
                     f"{r.median_ms:.4f}" if r.median_ms is not None else "-",
                     f"{r.speedup:.3f}x" if r.speedup else "-",
                     params + (f"  [{r.reason}]" if r.reason else "")))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    out = []
    for row in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
    return "\n".join(out)


def tune(project: PathLike, space: Space, *, strategy: str = "exhaustive",
         trials: int = 50, iterations: int = 20, warmup: int = 3,
         out: Optional[PathLike] = None,
         server_factory: Optional[Callable[[], ResidentServer]] = None,
         log: Callable[[str], None] = lambda s: None) -> TuneReport:
    """Runs the search; returns {"baseline", "results", "best", "best_dir"}."""
    p = Project(project)
    check_space(space, p.triton)
    out_dir = Path(out) if out else p.path / "tune"
    out_dir.mkdir(parents=True, exist_ok=True)
    t = Tuner(p, out_dir, iterations, warmup, server_factory, log)
    try:
        base = t.run_baseline()
        log(f"baseline: {base.verdict} {base.median_ms} ms {base.reason}")
        if strategy == "exhaustive":
            for cand in exhaustive(space):
                r = t.evaluate(cand)
                log(f"#{r.index} {r.verdict} {r.median_ms} {r.params} {r.reason}")
        elif strategy == "optuna":
            try:
                import optuna  # optional
            except ImportError as e:
                raise errors.FailedPrecondition(
                    "the optuna strategy needs the optuna package (pip install optuna); "
                    "--strategy exhaustive needs nothing") from e
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            keys = list(space)

            def objective(trial: optuna.Trial) -> float:
                # Values may be lists or null: choose by index.
                cand = {k: space[k][trial.suggest_categorical(k, list(range(len(space[k]))))]
                        for k in keys}
                r = t.evaluate(cand)
                log(f"#{r.index} {r.verdict} {r.median_ms} {r.params} {r.reason}")
                if not r.valid:
                    raise optuna.TrialPruned(r.reason or r.verdict)
                return cast(float, r.median_ms)  # (valid: it has one)

            study = optuna.create_study(direction="minimize",
                                        sampler=optuna.samplers.TPESampler(seed=0))
            study.optimize(objective, n_trials=trials)
        else:
            raise errors.InvalidArgument(f"strategy {strategy!r}: exhaustive or optuna")
    finally:
        t.close()
    best = best_of(t.results)
    best_dir = write_best(t, best) if best else None
    doc: TuneReport = {"project": str(p.path), "strategy": strategy,
                       "baseline": t.results[0].to_json(),
                       "results": [r.to_json() for r in t.results[1:]],
                       "best": best.to_json() if best else None,
                       "best_dir": str(best_dir) if best_dir else None,
                       "valid": sum(1 for r in t.results[1:] if r.valid),
                       "evaluated": len(t.results) - 1}
    (out_dir / "results.json").write_text(json.dumps(doc, indent=2))
    doc["table"] = format_table(t.results)
    return doc


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kerncap.tune", description=__doc__.split("\n\n")[0])
    ap.add_argument("project", help="reproducer folder (kerncapctl repro)")
    ap.add_argument("--space", required=True,
                    help="JSON file (or inline JSON object) of parameter: [values]")
    ap.add_argument("--strategy", choices=("exhaustive", "optuna"), default="exhaustive")
    ap.add_argument("--trials", type=int, default=50, help="optuna: candidates to evaluate")
    ap.add_argument("--iterations", type=int, default=20, help="timed launches per candidate")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", help="results folder (default: PROJECT/tune)")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per candidate on stderr")
    args = ap.parse_args(argv)
    try:
        text = args.space
        if not text.lstrip().startswith("{"):
            text = Path(args.space).read_text()
        space = json.loads(text)
    except (OSError, ValueError) as e:
        print(f"kerncap.tune: --space: {e}", file=sys.stderr)
        return 2
    log = (lambda s: print(s, file=sys.stderr)) if args.verbose else (lambda s: None)
    try:
        doc = tune(args.project, space, strategy=args.strategy, trials=args.trials,
                   iterations=args.iterations, warmup=args.warmup, out=args.out, log=log)
    except errors.NoDevice as e:
        print(f"kerncap.tune: skipped: {e}", file=sys.stderr)
        return 77
    except errors.KerncapError as e:
        print(f"kerncap.tune: {e}", file=sys.stderr)
        return 2 if isinstance(e, errors.InvalidArgument) else 3
    if args.json:
        print(json.dumps({k: v for k, v in doc.items() if k != "table"}, indent=2))
    else:
        print(doc["table"])
        if doc["best"]:
            b = doc["best"]
            print(f"\nbest: #{b['index']} {b['median_ms']:.4f} ms"
                  + (f" ({b['speedup']:.3f}x the captured kernel)" if b["speedup"] else "")
                  + f"; written to {doc['best_dir']} (build.sh)")
        else:
            print("\nno candidate validated: nothing written")
    return 0 if doc["best"] else 1


if __name__ == "__main__":
    sys.exit(main())
