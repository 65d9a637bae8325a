"""Running kerncap-replay (reproducer/replay) and reading its --json report.

The replayer needs a GPU and the CUDA driver (or a ROCm >= 6 HSA runtime),
which this package does not: it is found as $KERNCAP_REPLAY (must then be
executable) or `kerncap-replay` on PATH, run with --json, and its JSON
document (reproducer/replay/report.cc) becomes a ReplayResult,
ValidationResult or BenchResult. Exit codes (the shared table,
docs/EXIT_CODES.md): 0 ok/pass, 8 outputs differ (a ValidationResult with
passed=False, not an exception), 2 usage (InvalidArgument), 77 no CUDA
driver/device or HSA runtime (NoDevice); any other code with its JSON error
object on stderr is a ReplayError.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, TypedDict, Union, cast

from . import _format as fmt
from . import errors
from ._types import JSONFloat, JSONObject, PathLike, RegionDtypes
from ._vocab import EXIT_CODES
from .models import JsonMixin

if TYPE_CHECKING:
    import pandas as pd

REPLAY_ENV = "KERNCAP_REPLAY"
REPLAY_NAME = "kerncap-replay"
EXIT_PASS = EXIT_CODES["ok"]
EXIT_FAIL = EXIT_CODES["mismatch"]  # validation ran and outputs differ
EXIT_USAGE = EXIT_CODES["usage"]
EXIT_ERROR = EXIT_CODES["error"]
EXIT_NO_DEVICE = EXIT_CODES["no_device"]


def find_replayer() -> str:
    """$KERNCAP_REPLAY, else kerncap-replay on PATH; ReplayerNotFound says
    where it looked."""
    env = os.environ.get(REPLAY_ENV, "")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise errors.ReplayerNotFound(
            f"{REPLAY_ENV}={env} is not an executable file; point it at kerncap-replay or unset it")
    found = shutil.which(REPLAY_NAME)
    if found:
        return found
    raise errors.ReplayerNotFound(
        f"kerncap-replay not found: looked at ${REPLAY_ENV} (unset) and on PATH "
        f"({os.environ.get('PATH', '')}). It is the GPU replayer, built with the CUDA toolkit "
        "(target kerncap-replay): put it on PATH or set KERNCAP_REPLAY=/path/to/kerncap-replay")


# ---- results ----

class MovedRangeJSON(TypedDict, total=False):
    old_va: str  # "0x..."
    new_va: str
    size: int


class MismatchJSON(TypedDict, total=False):
    offset: int
    expected: JSONFloat
    actual: JSONFloat


class RegionValidationJSON(TypedDict, total=False):
    """One of a validate report's region_results."""
    index: int
    va: str
    replay_va: str
    kind: str
    name: str
    size: int
    dtype: str
    atol: JSONFloat
    rtol: JSONFloat
    ulp: int
    passed: bool
    bytes_differing: int
    elements: int
    elements_differing: int
    elements_failing: int
    nan_mismatches: int
    max_abs_error: JSONFloat
    max_rel_error: JSONFloat
    max_ulp_error: int
    first_diff_offset: int
    first_fail_offset: int
    samples: List[MismatchJSON]


class ReplayReportJSON(TypedDict, total=False):
    """`kerncap-replay --json`'s report (reproducer/replay/core/report.cc): the
    keys this client reads. run reports the common part, validate and bench
    add theirs."""
    command: str  # "run", "validate" or "bench"
    capture_id: str
    kernel: str
    device: str
    platform: str
    relocated: bool
    moved_ranges: List[MovedRangeJSON]
    patched_pointer_words: int
    regions: int
    restored_bytes: int
    reservations: int
    restore_seconds: JSONFloat
    restore_gbps: JSONFloat
    upload_bytes: int
    upload_seconds: JSONFloat
    upload_gbps: JSONFloat
    upload_workers: int
    launch_ms: JSONFloat
    warnings: List[str]
    hsa: JSONObject
    # validate
    result: str  # "pass" or "fail"
    regions_compared: int
    regions_failing: int
    region_results: List[RegionValidationJSON]
    # bench
    warmup: int
    iterations: int
    cold_l2: bool
    restore_each: bool
    restore_bytes_per_iteration: int
    min_ms: JSONFloat
    median_ms: JSONFloat
    max_ms: JSONFloat
    mean_ms: JSONFloat
    stddev_ms: JSONFloat
    samples_ms: List[JSONFloat]


class _ErrorJSON(TypedDict, total=False):
    code: str
    message: str
    exit_code: int


class _ErrorDoc(TypedDict):
    """The error object on stderr (docs/JSON.md)."""
    error: Optional[_ErrorJSON]


def _num(v: Union[float, str, None]) -> float:
    """report.cc writes infinities and NaN as strings."""
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    return float(v) if v is not None else 0.0


def _addr(v: Union[int, str, None]) -> int:
    if isinstance(v, str):
        return int(v, 16) if v.lower().startswith("0x") else int(v)
    return int(v or 0)


@dataclass
class MovedRange(JsonMixin):
    old_va: int
    new_va: int
    size: int

    _addresses = ("old_va", "new_va")


class _CommonFields(TypedDict):
    """ReplayResult's fields that every command reports (from_json's keywords)."""
    command: str
    capture_id: str
    kernel: str
    device: str
    platform: str
    relocated: bool
    moved_ranges: List[MovedRange]
    patched_pointer_words: int
    regions: int
    restored_bytes: int
    reservations: int
    restore_seconds: float
    restore_gbps: float
    upload_bytes: int
    upload_seconds: float
    upload_gbps: float
    upload_workers: int
    launch_ms: float
    warnings: List[str]
    hsa: Optional[JSONObject]
    raw: ReplayReportJSON


@dataclass
class ReplayResult(JsonMixin):
    """`kerncap-replay run` (and the part every command reports)."""
    command: str = "run"
    capture_id: str = ""
    kernel: str = ""
    device: str = ""
    platform: str = "cuda"
    relocated: bool = False
    moved_ranges: List[MovedRange] = field(default_factory=list)
    patched_pointer_words: int = 0
    regions: int = 0
    restored_bytes: int = 0
    reservations: int = 0
    restore_seconds: float = 0.0
    restore_gbps: float = 0.0
    upload_bytes: int = 0
    upload_seconds: float = 0.0
    upload_gbps: float = 0.0
    upload_workers: int = 0
    launch_ms: float = 0.0
    warnings: List[str] = field(default_factory=list)
    hsa: Optional[JSONObject] = None
    exit_code: int = 0
    raw: ReplayReportJSON = field(default_factory=lambda: ReplayReportJSON(), repr=False,
                                  compare=False)

    @classmethod
    def _common(cls, j: ReplayReportJSON) -> _CommonFields:
        return _CommonFields(
            command=j.get("command", "run"), capture_id=j.get("capture_id", ""),
            kernel=j.get("kernel", ""), device=j.get("device", ""),
            platform=j.get("platform", "cuda"), relocated=bool(j.get("relocated", False)),
            moved_ranges=[MovedRange(_addr(m.get("old_va")), _addr(m.get("new_va")),
                                     int(m.get("size", 0))) for m in j.get("moved_ranges", [])],
            patched_pointer_words=int(j.get("patched_pointer_words", 0)),
            regions=int(j.get("regions", 0)), restored_bytes=int(j.get("restored_bytes", 0)),
            reservations=int(j.get("reservations", 0)),
            restore_seconds=_num(j.get("restore_seconds", 0)),
            restore_gbps=_num(j.get("restore_gbps", 0)),
            upload_bytes=int(j.get("upload_bytes", 0)),
            upload_seconds=_num(j.get("upload_seconds", 0)),
            upload_gbps=_num(j.get("upload_gbps", 0)),
            upload_workers=int(j.get("upload_workers", 0)),
            launch_ms=_num(j.get("launch_ms", 0)), warnings=list(j.get("warnings", [])),
            hsa=j.get("hsa"), raw=j)

    @classmethod
    def from_json(cls, j: ReplayReportJSON, exit_code: int = 0) -> "ReplayResult":
        return cls(exit_code=exit_code, **cls._common(j))

    def _info_pairs(self) -> List[Tuple[str, object]]:
        pairs: List[Tuple[str, object]] = [
            ("capture", self.capture_id), ("kernel", self.kernel),
            ("device", f"{self.device} ({self.platform})"),
            ("restored", f"{self.regions} regions, {fmt.human_bytes(self.restored_bytes)} in "
                         f"{self.reservations} reservations, {self.restore_seconds:.3f} s"),
            ("address space", "RELOCATED: " + "; ".join(
                f"{fmt.hex_addr(m.old_va)} +{m.size} -> {fmt.hex_addr(m.new_va)}"
                for m in self.moved_ranges) + f" ({self.patched_pointer_words} pointer words "
                "patched)" if self.relocated else "every region at its original address"),
            ("launch", f"{self.launch_ms:.4f} ms")]
        pairs += [("warning", w) for w in self.warnings]
        return pairs

    def _repr_html_(self) -> str:
        return fmt.html_kv(self._info_pairs(), caption=f"kerncap-replay {self.command}")

    def __str__(self) -> str:
        return "\n".join(f"{k:>14}  {fmt.cell(v)}" for k, v in self._info_pairs())


@dataclass
class Mismatch(JsonMixin):
    offset: int
    expected: float
    actual: float


@dataclass
class RegionValidation(JsonMixin):
    index: int
    va: int
    replay_va: int
    kind: str
    name: str
    size: int
    dtype: str
    atol: float
    rtol: float
    ulp: int
    passed: bool
    bytes_differing: int
    elements: int
    elements_differing: int
    elements_failing: int
    nan_mismatches: int
    max_abs_error: float
    max_rel_error: float
    max_ulp_error: int
    first_diff_offset: int
    first_fail_offset: int
    samples: List[Mismatch] = field(default_factory=list)

    _addresses = ("va", "replay_va")

    @classmethod
    def from_json(cls, j: RegionValidationJSON) -> "RegionValidation":
        return cls(
            index=int(j.get("index", 0)), va=_addr(j.get("va")), replay_va=_addr(j.get("replay_va")),
            kind=j.get("kind", ""), name=j.get("name", ""), size=int(j.get("size", 0)),
            dtype=j.get("dtype", "bytes"), atol=_num(j.get("atol", 0)), rtol=_num(j.get("rtol", 0)),
            ulp=int(j.get("ulp", 0)), passed=bool(j.get("passed", True)),
            bytes_differing=int(j.get("bytes_differing", 0)), elements=int(j.get("elements", 0)),
            elements_differing=int(j.get("elements_differing", 0)),
            elements_failing=int(j.get("elements_failing", 0)),
            nan_mismatches=int(j.get("nan_mismatches", 0)),
            max_abs_error=_num(j.get("max_abs_error", 0)),
            max_rel_error=_num(j.get("max_rel_error", 0)),
            max_ulp_error=int(j.get("max_ulp_error", 0)),
            first_diff_offset=int(j.get("first_diff_offset", -1)),
            first_fail_offset=int(j.get("first_fail_offset", -1)),
            samples=[Mismatch(int(s.get("offset", 0)), _num(s.get("expected")),
                              _num(s.get("actual"))) for s in j.get("samples", [])])


_REGION_COLUMNS = ("index", "va", "kind", "name", "size", "dtype", "passed", "elements",
                   "elements_differing", "elements_failing", "max_abs_error", "max_rel_error",
                   "max_ulp_error", "first_diff_offset")


@dataclass
class ValidationResult(ReplayResult):
    """`kerncap-replay validate`: per-region comparison with the captured
    post-dispatch memory. `passed` is False when any region differs beyond
    its tolerance (exit code 1)."""
    passed: bool = False
    regions_compared: int = 0
    regions_failing: int = 0
    region_results: List[RegionValidation] = field(default_factory=list)

    @classmethod
    def from_json(cls, j: ReplayReportJSON, exit_code: int = 0) -> "ValidationResult":
        return cls(exit_code=exit_code, passed=j.get("result") == "pass",
                   regions_compared=int(j.get("regions_compared", 0)),
                   regions_failing=int(j.get("regions_failing", 0)),
                   region_results=[RegionValidation.from_json(r)
                                   for r in j.get("region_results", [])],
                   **cls._common(j))

    @property
    def failing(self) -> List[RegionValidation]:
        return [r for r in self.region_results if not r.passed]

    def _rows(self) -> List[List[object]]:
        return [[r.index, fmt.hex_addr(r.va), r.kind, r.name, fmt.human_bytes(r.size), r.dtype,
                 "pass" if r.passed else "FAIL", r.elements, r.elements_differing,
                 r.elements_failing, f"{r.max_abs_error:g}", f"{r.max_rel_error:g}",
                 r.max_ulp_error, r.first_diff_offset if r.first_diff_offset >= 0 else None]
                for r in self.region_results]

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd
        return pd.DataFrame([{f.name: getattr(r, f.name) for f in fields(r) if f.name != "samples"}
                             for r in self.region_results])

    def _repr_html_(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (fmt.html_kv(self._info_pairs() + [
                    ("result", f"{verdict}: {self.regions_compared} regions compared, "
                               f"{self.regions_failing} differ")],
                    caption="kerncap-replay validate")
                + fmt.html_table(_REGION_COLUMNS, self._rows(),
                                 highlight=[not r.passed for r in self.region_results]))

    def __str__(self) -> str:
        return (super().__str__() + "\n"
                + fmt.text_table(_REGION_COLUMNS, self._rows()) + "\n"
                + f"{'PASS' if self.passed else 'FAIL'}: {self.regions_compared} regions "
                  f"compared, {self.regions_failing} differ")


@dataclass
class BenchResult(ReplayResult):
    """`kerncap-replay bench`: device-timed launches (CUDA events)."""
    warmup: int = 0
    iterations: int = 0
    cold_l2: bool = False
    restore_each: bool = False
    restore_bytes_per_iteration: int = 0
    min_ms: float = 0.0
    median_ms: float = 0.0
    max_ms: float = 0.0
    mean_ms: float = 0.0
    stddev_ms: float = 0.0
    samples_ms: List[float] = field(default_factory=list)

    @classmethod
    def from_json(cls, j: ReplayReportJSON, exit_code: int = 0) -> "BenchResult":
        return cls(exit_code=exit_code, warmup=int(j.get("warmup", 0)),
                   iterations=int(j.get("iterations", 0)), cold_l2=bool(j.get("cold_l2", False)),
                   restore_each=bool(j.get("restore_each", False)),
                   restore_bytes_per_iteration=int(j.get("restore_bytes_per_iteration", 0)),
                   min_ms=_num(j.get("min_ms", 0)), median_ms=_num(j.get("median_ms", 0)),
                   max_ms=_num(j.get("max_ms", 0)), mean_ms=_num(j.get("mean_ms", 0)),
                   stddev_ms=_num(j.get("stddev_ms", 0)),
                   samples_ms=[_num(s) for s in j.get("samples_ms", [])], **cls._common(j))

    def _bench_pairs(self) -> List[Tuple[str, object]]:
        opts = [f"{self.warmup} warm-up", f"{self.iterations} iterations"]
        if self.cold_l2:
            opts.append("cold L2")
        if self.restore_each:
            opts.append(f"{fmt.human_bytes(self.restore_bytes_per_iteration)} restored per launch")
        return [("bench", ", ".join(opts)),
                ("median", f"{self.median_ms:.4f} ms"),
                ("min / max", f"{self.min_ms:.4f} / {self.max_ms:.4f} ms"),
                ("mean ± stddev", f"{self.mean_ms:.4f} ± {self.stddev_ms:.4f} ms")]

    def _repr_html_(self) -> str:
        return fmt.html_kv(self._info_pairs() + self._bench_pairs(),
                           caption="kerncap-replay bench")

    def __str__(self) -> str:
        return "\n".join(f"{k:>14}  {fmt.cell(v)}"
                         for k, v in self._info_pairs() + self._bench_pairs())


_RESULT_TYPES = {"run": ReplayResult, "validate": ValidationResult, "bench": BenchResult}


# ---- arguments ----

def validate_flags(*, dtype: Optional[str] = None,
                   region_dtypes: Optional[RegionDtypes] = None,
                   atol: Optional[float] = None, rtol: Optional[float] = None,
                   ulp: Optional[int] = None, nan_equal: bool = True) -> List[str]:
    flags: List[str] = []
    if dtype:
        flags.append(f"--dtype={dtype}")
    if isinstance(region_dtypes, dict):
        for sel, t in region_dtypes.items():
            sel_text = f"0x{sel:x}" if isinstance(sel, int) and sel > 4096 else str(sel)
            flags.append(f"--region-dtype={sel_text}:{t}")
    elif region_dtypes:
        flags += [f"--region-dtype={r}" for r in region_dtypes]
    if atol is not None:
        flags.append(f"--atol={atol!r}")
    if rtol is not None:
        flags.append(f"--rtol={rtol!r}")
    if ulp is not None:
        flags.append(f"--ulp={int(ulp)}")
    if not nan_equal:
        flags.append("--nan-unequal")
    return flags


def bench_flags(*, warmup: Optional[int] = None, iterations: Optional[int] = None,
                cold_l2: bool = False, restore_each: Optional[bool] = None,
                samples: bool = False) -> List[str]:
    flags: List[str] = []
    if warmup is not None:
        flags.append(f"--warmup={int(warmup)}")
    if iterations is not None:
        flags.append(f"--iterations={int(iterations)}")
    if cold_l2:
        flags.append("--cold-l2")
    if restore_each is True:
        flags.append("--restore-each")
    elif restore_each is False:
        flags.append("--no-restore-each")
    if samples:
        flags.append("--samples")
    return flags


def common_flags(*, device: Optional[int] = None, relocate: Optional[bool] = None,
                 platform: Optional[str] = None, hsa_runtime: Optional[str] = None,
                 verify_digests: bool = False) -> List[str]:
    """relocate: None (allowed as a fallback), False (--no-relocate), True
    (--force-relocate, exercises the fallback)."""
    flags: List[str] = []
    if device is not None:
        flags.append(f"--device={int(device)}")
    if relocate is False:
        flags.append("--no-relocate")
    elif relocate is True:
        flags.append("--force-relocate")
    if platform:
        flags.append(f"--platform={platform}")
    if hsa_runtime:
        flags.append(f"--hsa-runtime={hsa_runtime}")
    if verify_digests:
        flags.append("--verify-digests")
    return flags


def build_argv(binary: str, mode: str, source: str, daemon: Optional[str],
               flags: Sequence[str]) -> List[str]:
    argv = [binary, mode]
    if daemon:
        argv.append(f"--daemon={daemon}")
    argv += [source, "--json", *flags]
    return argv


def parse_output(mode: str, returncode: int, stdout: str, stderr: str) -> ReplayResult:
    """Turns one kerncap-replay run into a result or an exception."""
    doc: object = None
    text = stdout.strip()
    if text:
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
    err_text = stderr.strip().replace("kerncap-replay: ", "")
    # An error is one JSON object on stderr (docs/JSON.md).
    err_doc: Optional[_ErrorDoc] = None
    for line in reversed(stderr.strip().splitlines()):
        try:
            candidate = json.loads(line)
        except ValueError:
            continue
        if isinstance(candidate, dict) and "error" in candidate:
            err_doc = cast(_ErrorDoc, candidate)
            break
    if err_doc is not None:
        e: _ErrorJSON = err_doc["error"] or {}
        message = e.get("message") or err_text or "kerncap-replay failed"
        code = int(e.get("exit_code", returncode))
        cls = errors.NoDevice if code == EXIT_NO_DEVICE else errors.ReplayError
        raise cls(message, exit_code=returncode, stderr=stderr, code=e.get("code"))
    if returncode == EXIT_USAGE:
        raise errors.InvalidArgument(f"kerncap-replay {mode}: {err_text or 'usage error'}")
    if returncode == EXIT_NO_DEVICE:
        raise errors.NoDevice(err_text or "no CUDA driver or device", exit_code=returncode,
                              stderr=stderr)
    if returncode not in (EXIT_PASS, EXIT_FAIL) or not isinstance(doc, dict):
        raise errors.ReplayError(
            f"kerncap-replay {mode} exited with {returncode}: {err_text or 'no JSON report'}",
            exit_code=returncode, stderr=stderr)
    report = cast(ReplayReportJSON, doc)
    result_cls = _RESULT_TYPES.get(report.get("command", mode), _RESULT_TYPES[mode])
    return result_cls.from_json(report, exit_code=returncode)


def run_replayer(mode: str, source: str, *, daemon: Optional[str] = None,
                 flags: Sequence[str] = (), timeout: Optional[float] = None,
                 binary: Optional[str] = None) -> ReplayResult:
    argv = build_argv(binary or find_replayer(), mode, source, daemon, flags)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise errors.DeadlineExceeded(f"kerncap-replay {mode} ran longer than {timeout} s") from e
    except OSError as e:
        raise errors.ReplayError(f"cannot run {argv[0]}: {e}") from e
    return parse_output(mode, proc.returncode, proc.stdout, proc.stderr)


async def run_replayer_async(mode: str, source: str, *, daemon: Optional[str] = None,
                             flags: Sequence[str] = (), timeout: Optional[float] = None,
                             binary: Optional[str] = None) -> ReplayResult:
    import asyncio
    argv = build_argv(binary or find_replayer(), mode, source, daemon, flags)
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
    except OSError as e:
        raise errors.ReplayError(f"cannot run {argv[0]}: {e}") from e
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise errors.DeadlineExceeded(f"kerncap-replay {mode} ran longer than {timeout} s") from None
    return parse_output(mode, proc.returncode or 0, out.decode(errors="replace"),
                        err.decode(errors="replace"))


# ---- on .kcap files, without a daemon ----

def _kcap_source(path: object, daemon: Optional[str]) -> str:
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if text is None:
        raise errors.InvalidArgument(
            "expected a .kcap path (to replay a capture id, use a client: "
            "kerncap.connect().replay(id))")
    if daemon is None and not os.path.isfile(text):
        raise errors.NotFound(f"no such .kcap file: {text}")
    return text


def replay(path: PathLike, *, daemon: Optional[str] = None, device: Optional[int] = None,
           relocate: Optional[bool] = None, timeout: Optional[float] = None,
           extra_flags: Sequence[str] = ()) -> ReplayResult:
    """`kerncap-replay run` on a .kcap file (or, with daemon="unix:/path", a
    capture id in that daemon)."""
    return run_replayer("run", _kcap_source(path, daemon), daemon=daemon, timeout=timeout,
                        flags=common_flags(device=device, relocate=relocate) + list(extra_flags))


def validate(path: PathLike, *, daemon: Optional[str] = None, dtype: Optional[str] = None,
             region_dtypes: Optional[RegionDtypes] = None, atol: Optional[float] = None,
             rtol: Optional[float] = None, ulp: Optional[int] = None, nan_equal: bool = True,
             device: Optional[int] = None, relocate: Optional[bool] = None,
             timeout: Optional[float] = None,
             extra_flags: Sequence[str] = ()) -> ValidationResult:
    """`kerncap-replay validate` on a .kcap file; see Client.validate."""
    flags = (common_flags(device=device, relocate=relocate)
             + validate_flags(dtype=dtype, region_dtypes=region_dtypes, atol=atol, rtol=rtol,
                              ulp=ulp, nan_equal=nan_equal) + list(extra_flags))
    return run_replayer("validate", _kcap_source(path, daemon), daemon=daemon, flags=flags,
                        timeout=timeout)  # type: ignore[return-value]


def bench(path: PathLike, *, daemon: Optional[str] = None, iterations: Optional[int] = None,
          warmup: Optional[int] = None, cold_l2: bool = False,
          restore_each: Optional[bool] = None, samples: bool = False,
          device: Optional[int] = None, relocate: Optional[bool] = None,
          timeout: Optional[float] = None, extra_flags: Sequence[str] = ()) -> BenchResult:
    """`kerncap-replay bench` on a .kcap file; see Client.bench."""
    flags = (common_flags(device=device, relocate=relocate)
             + bench_flags(warmup=warmup, iterations=iterations, cold_l2=cold_l2,
                           restore_each=restore_each, samples=samples) + list(extra_flags))
    return run_replayer("bench", _kcap_source(path, daemon), daemon=daemon, flags=flags,
                        timeout=timeout)  # type: ignore[return-value]
