"""What the sync and async clients share: request building, argument
checking, and the stateful parts of streaming calls (export sink, import
source, capture waiter, reproducer writer), written once and driven by
either client's loop."""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import (TYPE_CHECKING, Callable, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Set, Union, cast)

from google.protobuf.message import Message

from . import _progress, errors
from ._pb import pb
from ._types import (ArmRef, CaptureRef, Duration, Expiry, Instant, JSONObject, PathLike,
                     ProgressArg, TagFilter)
from .kcap import KcapReader, KcapWriter
from .models import (MATCH_VALUES, REPRODUCER_KINDS, ExportResult, KernelList, LoadedKernel,
                     ProjectManifest, ReproResult)

if TYPE_CHECKING:
    from . import _messages as msg

UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1


def capture_id(value: Union[CaptureRef, object]) -> str:
    """Accepts an id (or unique prefix), a CaptureSummary, a Capture, an
    ExportResult/ImportResult; InvalidArgument for anything else."""
    if isinstance(value, str):
        return value
    for attr in ("capture_id", "id"):
        v = getattr(value, attr, None)
        if isinstance(v, str):
            return v
    raise errors.InvalidArgument(f"expected a capture id, not {type(value).__name__}")


def arm_id_of(value: ArmRef) -> str:
    if isinstance(value, str):
        return value
    v = getattr(value, "arm_id", None)
    if isinstance(v, str):
        return v
    raise errors.InvalidArgument(f"expected an arm id, not {type(value).__name__}")


def _uint(name: str, value: Optional[int], limit: int) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgument(f"{name}: expected an integer, not {value!r}")
    if value < 0 or value > limit:
        raise errors.InvalidArgument(f"{name}: {value} is out of range (0..{limit})")
    return value


# How often agents(wait=...) asks again while no agent has connected.
AGENT_POLL_S = 0.05

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def duration_ms(value: Duration, name: str = "ttl") -> int:
    """Seconds (int/float), a timedelta, or text like "90", "30s", "5m",
    "1h30m", "250ms", "2d" (kerncapctl's --ttl syntax)."""
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise errors.InvalidArgument(
                    f'{name}: bad duration "{value}" (examples: 30s, 5m, 1h30m, 250ms, 2d, 90)') \
                    from None
            scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
            seconds = sum(float(n) * scale[u] for n, u in parts)
    else:
        raise errors.InvalidArgument(f"{name}: expected seconds, a timedelta or text like "
                                     f"'5m', not {type(value).__name__}")
    if seconds <= 0:
        raise errors.InvalidArgument(f"{name}: duration must be positive")
    return int(round(seconds * 1000))


def unix_ms(value: Instant, name: str) -> int:
    """A datetime (naive = local time) or unix seconds."""
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    raise errors.InvalidArgument(f"{name}: expected a datetime or unix seconds, not {value!r}")


def arm_request(kernel: Optional[str] = None, *, mangled: Optional[str] = None,
                match: Optional[str] = None, pid: Optional[int] = None,
                process: Optional[str] = None, device: Optional[int] = None,
                skip: Optional[int] = None, nth: Optional[int] = None,
                count: Optional[int] = None, expires: Optional[Expiry] = None,
                ttl: Optional[Duration] = None, tags: Optional[Mapping[str, str]] = None,
                rank: Optional[int] = None,
                per_shape: Union[bool, str, None] = None) -> msg.ArmRequest:
    if mangled is not None:
        if kernel is not None:
            raise errors.InvalidArgument("arm: give kernel= or mangled=, not both")
        if match not in (None, "mangled"):
            raise errors.InvalidArgument("arm: mangled= always matches the exact mangled name")
        kernel, match = mangled, "mangled"
    match_name = (match or "substring").lower()
    if match_name not in MATCH_VALUES:
        raise errors.InvalidArgument(
            f'arm: bad match "{match}": one of substring, glob, regex, mangled')
    sel = pb.Selector(kernel=kernel or "", match=MATCH_VALUES[match_name],
                      pid=_uint("pid", pid, UINT32_MAX), process_name=process or "",
                      skip=_uint("skip", skip, UINT64_MAX), nth=_uint("nth", nth, UINT64_MAX),
                      count=_uint("count", count, UINT32_MAX))
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, int):
            raise errors.InvalidArgument(f"device: expected an integer ordinal, not {device!r}")
        if not -(1 << 31) <= device < (1 << 31):
            raise errors.InvalidArgument(f"device: {device} is out of range")
        # Negative ordinals are passed on: the daemon's message names them.
        sel.device = device
        sel.has_device = True
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise errors.InvalidArgument(f"rank: expected a rank (an integer >= 0), not {rank!r}")
        sel.rank = rank
        sel.has_rank = True
    if per_shape is not None and per_shape is not False:
        mode = "scalars" if per_shape is True else str(per_shape).lower()
        if mode not in ("scalars", "launch"):
            raise errors.InvalidArgument(
                f"per_shape: expected True/'scalars' (launch configuration and scalar "
                f"arguments) or 'launch' (launch configuration only), not {per_shape!r}")
        if nth is not None:
            raise errors.InvalidArgument(
                "arm: per_shape takes the first dispatch of each shape; nth names one "
                "dispatch (use skip= to let dispatches pass first)")
        sel.per_shape = pb.PER_SHAPE_SCALARS if mode == "scalars" else pb.PER_SHAPE_LAUNCH
    req = pb.ArmRequest(selector=sel)
    if expires is not None and ttl is not None:
        raise errors.InvalidArgument("arm: give expires= or ttl=, not both")
    if expires is not None:
        if isinstance(expires, _dt.timedelta):
            req.ttl_ms = duration_ms(expires, "expires")
        else:
            req.expires_unix_ms = unix_ms(expires, "expires")
    if ttl is not None:
        req.ttl_ms = duration_ms(ttl)
    for k, v in (tags or {}).items():
        req.tags[str(k)] = str(v)
    return req


def kernel_filter(kernel: Optional[str],
                  match: Optional[str] = None) -> Callable[[LoadedKernel], bool]:
    """The census filter (kerncapctl kernels --kernel/--match): a predicate
    over LoadedKernel that selects what an arm with this pattern would
    take. Same rules as the agents' NameMatcher (common/agent_link/
    selector.cc): the demangled name (the mangled one when there is none) for
    substring, glob (whole name, fnmatch-style) and regex (search); the exact
    mangled name for mangled. Python's re stands in for the agents' linear
    regex engine, which accepts a subset of its syntax."""
    match_name = (match or "substring").lower()
    if match_name not in MATCH_VALUES:
        raise errors.InvalidArgument(
            f'kernels: bad match "{match}": one of substring, glob, regex, mangled')
    pattern = kernel or ""
    if match_name == "mangled":
        return lambda k: k.mangled_name == pattern
    if match_name == "substring":
        return lambda k: pattern in k.name
    if match_name == "glob":
        import fnmatch
        return lambda k: fnmatch.fnmatchcase(k.name, pattern)
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise errors.InvalidArgument(f"kernels: bad regex {pattern!r}: {e}") from None
    return lambda k: rx.search(k.name) is not None


# ListKernelsRequest.sample_ms bound (common/control/limits.h kMaxKernelSampleMs).
MAX_KERNEL_SAMPLE_MS = 60_000


def list_kernels_request(pid: Optional[int], process: Optional[str], agent: Optional[str],
                         sample: Optional[Duration]) -> msg.ListKernelsRequest:
    sample_ms = 0
    if sample is not None:
        sample_ms = duration_ms(sample, "sample")
        if sample_ms > MAX_KERNEL_SAMPLE_MS:
            raise errors.InvalidArgument(
                f"sample: {sample_ms} ms is more than the {MAX_KERNEL_SAMPLE_MS} ms a sample "
                "may take")
    return pb.ListKernelsRequest(pid=_uint("pid", pid, UINT32_MAX), process_name=process or "",
                                 agent_id=agent or "", sample_ms=sample_ms)


def kernel_list(resp: msg.ListKernelsResponse, kernel: Optional[str],
                match: Optional[str]) -> KernelList:
    """A ListKernelsResponse as a KernelList, filtered by kernel_filter when
    a pattern (or a match kind) is given; the notes are kept whole."""
    listing = KernelList.from_pb(resp)
    if kernel is None and match is None:
        return listing
    keep = kernel_filter(kernel, match)
    return KernelList([k for k in listing if keep(k)], listing.notes, listing.sampled)


def disarm_request(arm: Optional[ArmRef], all_arms: Optional[bool]) -> msg.DisarmRequest:
    if arm is None:
        if all_arms is False:
            raise errors.InvalidArgument("disarm: give an arm id, or all=True")
        return pb.DisarmRequest(all=True)
    if all_arms:
        raise errors.InvalidArgument("disarm: give an arm id or all=True, not both")
    return pb.DisarmRequest(arm_id=arm_id_of(arm))


def tag_filter(tag: Optional[TagFilter]) -> str:
    if tag is None:
        return ""
    if isinstance(tag, Mapping):
        if len(tag) != 1:
            raise errors.InvalidArgument("captures: tag= filters on one key=value pair")
        (k, v), = tag.items()
        return f"{k}={v}"
    if isinstance(tag, tuple) and len(tag) == 2:
        return f"{tag[0]}={tag[1]}"
    text = str(tag)
    if "=" not in text or text.startswith("="):
        raise errors.InvalidArgument(f'captures: bad tag "{text}": expected key=value')
    return text


def list_captures_request(kernel: Optional[str], pid: Optional[int], tag: Optional[TagFilter],
                          limit: Optional[int]) -> msg.ListCapturesRequest:
    return pb.ListCapturesRequest(kernel_contains=kernel or "",
                                  pid=_uint("pid", pid, UINT32_MAX), tag=tag_filter(tag),
                                  limit=_uint("limit", limit, UINT32_MAX))


def reproducer_kind(kind: Optional[str]) -> int:
    name = (kind or "auto").lower()
    if name not in REPRODUCER_KINDS:
        raise errors.InvalidArgument(
            f'repro: bad kind "{kind}": one of {", ".join(REPRODUCER_KINDS)}')
    return REPRODUCER_KINDS[name]


# ---- export ----

class ExportSink:
    """Consumes the raw ExportCapture frames: each is written to the .kcap
    exactly as the daemon sent it and parsed only to follow progress."""

    def __init__(self, writer: KcapWriter, progress: ProgressArg) -> None:
        self.writer = writer
        self.progress_arg = progress
        self.bar: Optional[_progress.Bar] = None
        self.capture_id = ""
        self.chunks = 0
        self.raw_bytes = 0

    def add(self, payload: bytes) -> None:
        frame = pb.TransferFrame.FromString(payload)
        if frame.HasField("manifest"):
            if self.capture_id:
                raise errors.DataLoss("the daemon sent a second manifest")
            self.capture_id = frame.manifest.capture_id
            self.bar = _progress.make(self.progress_arg, f"export {self.capture_id}",
                                      frame.bytes_total)
        elif frame.HasField("chunk"):
            if not self.capture_id:
                raise errors.DataLoss("the daemon sent a chunk before the manifest")
            self.chunks += 1
            self.raw_bytes += frame.chunk.raw_size
            if self.bar is not None:
                self.bar.update(self.raw_bytes)
        self.writer.append(payload)

    def finish(self, path: PathLike) -> ExportResult:
        if not self.capture_id:
            raise errors.Internal("the daemon sent no manifest")
        self.writer.finish()
        self.close()
        return ExportResult(self.capture_id, os.fspath(path), self.chunks, self.raw_bytes,
                            self.writer.bytes_written)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# ---- import ----

class ImportSource:
    """Yields a .kcap file's records (raw, as written) for ImportCapture and
    remembers a read error, which gRPC would otherwise only log."""

    def __init__(self, path: PathLike, progress: ProgressArg) -> None:
        self.path = os.fspath(path)
        self.reader = KcapReader(self.path)  # header and manifest checked before any RPC
        self.error: Optional[BaseException] = None
        self.bar = _progress.make(progress, f"import {os.path.basename(self.path)}",
                                  self.reader.bytes_total)
        self.raw_bytes = 0

    def payloads(self) -> Iterator[bytes]:
        try:
            for i, payload in enumerate(self.reader.payloads()):
                if i > 0:  # chunk records (the first one is the manifest)
                    self.raw_bytes += pb.TransferFrame.FromString(payload).chunk.raw_size
                    self.bar.update(self.raw_bytes)
                yield payload
        except BaseException as e:  # noqa: B902 — recorded, then re-raised
            if not isinstance(e, GeneratorExit):
                self.error = e
            raise

    def close(self) -> None:
        self.bar.close()
        self.reader.close()

    def failed(self) -> Optional[errors.KerncapError]:
        """The read error, with the note that nothing was imported."""
        if self.error is None:
            return None
        e = self.error
        if isinstance(e, errors.KerncapError):
            return type(e)(f"{e.message} (nothing was imported)")
        return errors.DataLoss(f"reading {self.path}: {e} (nothing was imported)")


# ---- waiting for a capture ----

class Waiter:
    """Decides, from the daemon's state and its events, when the capture a
    caller waits for has arrived.

    arm_id: the first capture of that arm (also one it already has).
    kernel: a capture whose demangled name contains this (with arm_id: of
            that arm); without arm_id, only captures committed after the
            wait began (or at/after `since`).
    """

    def __init__(self, arm_id: Optional[str], kernel: Optional[str],
                 since_ms: Optional[int], raise_on_failure: bool) -> None:
        self.arm_id = arm_id
        self.kernel = kernel
        self.since_ms = since_ms
        self.raise_on_failure = raise_on_failure
        self.started_for_arm: Set[str] = set()
        self.kernels: Dict[str, str] = {}  # capture id -> kernel, from events/listings
        self.known_before: Optional[Set[str]] = None
        self.failures: List[str] = []

    def _kernel_ok(self, name: Optional[str]) -> bool:
        return not self.kernel or (name is not None and self.kernel in name)

    def describe(self) -> str:
        what = f"arm {self.arm_id}" if self.arm_id else "any arm"
        if self.kernel:
            what += f', kernel containing "{self.kernel}"'
        if self.failures:
            what += "; failures seen: " + "; ".join(self.failures[-3:])
        return what

    def _arm_state(self, arm: msg.ArmInfo, matching: Set[str]) -> Optional[str]:
        """The arm's first capture whose kernel matches (`matching`: ids known
        to match), or None; CaptureFailed when the arm ended without one."""
        for cid in arm.capture_ids:
            if not self.kernel or cid in matching:
                return cid
        if arm.state in (pb.ARM_EXPIRED, pb.ARM_DISARMED, pb.ARM_DONE):
            state = pb.ArmState.Name(arm.state)
            raise errors.CaptureFailed(
                f"arm {arm.arm_id} ended ({state}) without a matching capture"
                + (f"; failures: {'; '.join(self.failures)}" if self.failures else ""),
                arm_id=arm.arm_id)
        return None

    def check_state(self, arms: Optional[Sequence[msg.ArmInfo]],
                    captures: Sequence[msg.CaptureSummary]) -> Optional[str]:
        """Looks at ListArms(include_finished=True) (arm waits only) and
        ListCaptures(kernel_contains=kernel) answers."""
        for c in captures:
            self.kernels[c.capture_id] = c.kernel
        if self.arm_id:
            arm = next((a for a in arms or [] if a.arm_id == self.arm_id), None)
            if arm is None:
                raise errors.NotFound(f"no arm {self.arm_id} (unknown, or finished long ago)")
            return self._arm_state(arm, {c.capture_id for c in captures
                                         if self._kernel_ok(c.kernel)})
        if self.known_before is None and self.since_ms is None:
            self.known_before = {c.capture_id for c in captures}
            return None
        for c in sorted(captures, key=lambda c: c.created_unix_ms):
            if self.known_before is not None and c.capture_id in self.known_before:
                continue
            if self.since_ms is not None and c.created_unix_ms < self.since_ms:
                continue
            if self._kernel_ok(c.kernel):
                return c.capture_id
        return None

    def on_event(self, event: msg.Event) -> Optional[str]:
        kind = event.WhichOneof("kind")
        if kind == "capture_started":
            e = event.capture_started
            self.kernels[e.capture_id] = e.kernel
            if self.arm_id and e.arm_id == self.arm_id:
                self.started_for_arm.add(e.capture_id)
        elif kind == "capture_committed":
            s = event.capture_committed
            self.kernels[s.capture_id] = s.kernel
            if self.arm_id:
                if s.capture_id in self.started_for_arm and self._kernel_ok(s.kernel):
                    return s.capture_id
            elif self._kernel_ok(s.kernel) and (
                    self.since_ms is None or s.created_unix_ms >= self.since_ms):
                return s.capture_id
        elif kind == "arm_changed":
            arm = event.arm_changed
            if self.arm_id and arm.arm_id == self.arm_id:
                return self._arm_state(arm, {cid for cid in arm.capture_ids
                                             if self._kernel_ok(self.kernels.get(cid))})
        elif kind == "capture_failed":
            f = event.capture_failed
            mine = (self.arm_id and (f.arm_id == self.arm_id or f.capture_id in
                                     self.started_for_arm)) or (
                not self.arm_id and self.kernel and self._kernel_ok(
                    f.kernel or self.kernels.get(f.capture_id)))
            if mine:
                self.failures.append(f.reason)
                if self.raise_on_failure and not f.retried:
                    raise errors.CaptureFailed(
                        f"capture failed ({self.describe()}): {f.reason}",
                        arm_id=f.arm_id, capture_id=f.capture_id, reason=f.reason)
        return None

    def timeout_error(self, timeout: Optional[float]) -> errors.DeadlineExceeded:
        return errors.DeadlineExceeded(f"no capture within {timeout} s ({self.describe()})")


# ---- reproducers ----

class ReproWriter:
    """Writes GenerateReproducer's file frames under a local folder.

    Frames carry a path relative to the project root, content and a mode. A
    file larger than one message comes in several frames of the same path:
    each is written at its `offset`, and `total_size` (when the protocol has
    these fields) lets the writer check that every file arrived whole; with
    an older protocol, later frames of a path simply append. A path ending in
    "/" (or a directory mode) is an empty directory. The files go to a
    temporary sibling folder, which replaces `out` only once the stream ended
    well, so a failed call leaves nothing half-written."""

    def __init__(self, out: PathLike, overwrite: bool) -> None:
        self.out = Path(out).expanduser().resolve()
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            if not overwrite:
                raise errors.AlreadyExists(
                    f"{self.out} exists and is not empty (pass overwrite=True to replace it)")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=self.out.parent))
        self.has_offset = pb.has_field("ReproducerFile", "offset")
        self.has_total = pb.has_field("ReproducerFile", "total_size")
        self.modes: Dict[str, int] = {}
        self.totals: Dict[str, int] = {}
        self.files: List[str] = []

    def _target(self, rel: str) -> Path:
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or rel.startswith("~"):
            raise errors.DataLoss(f"reproducer file with an unsafe path {rel!r}")
        return self.tmp / rel

    def add(self, frame: msg.ReproducerFile) -> None:
        rel = frame.path
        target = self._target(rel.rstrip("/") or rel)
        if rel.endswith("/") or stat.S_ISDIR(frame.mode):  # an (empty) directory
            target.mkdir(parents=True, exist_ok=True)
            return
        first = rel not in self.modes
        if first:
            target.parent.mkdir(parents=True, exist_ok=True)
            self.files.append(rel)
        offset = frame.offset if self.has_offset else None
        with open(target, "wb" if first else ("r+b" if offset is not None else "ab")) as f:
            if offset:
                f.seek(offset)
            f.write(frame.content)
        if self.has_total and frame.total_size:
            self.totals[rel] = frame.total_size
        if frame.mode or first:
            self.modes[rel] = frame.mode & 0o7777 if frame.mode else 0o644

    def commit(self) -> List[str]:
        for rel, total in self.totals.items():
            size = (self.tmp / rel).stat().st_size
            if size != total:
                raise errors.DataLoss(
                    f"reproducer file {rel} arrived incomplete: {size} of {total} bytes")
        for rel, mode in self.modes.items():
            os.chmod(self.tmp / rel, mode)
        # mkdtemp made the folder 0700; a project folder gets the mode any
        # folder made here gets (0777 less the umask), like its subfolders.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o777 & ~umask)
        if self.out.exists():
            shutil.rmtree(self.out) if self.out.is_dir() else self.out.unlink()
        os.replace(self.tmp, self.out)
        return self.files

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def repro_request(cid: str, out: PathLike, *, kind: Optional[str], source_dir: Optional[str],
                  compile_commands: Optional[str], on_daemon: bool, overwrite: bool,
                  same_host: bool) -> msg.GenerateReproducerRequest:
    """`same_host` (a Unix socket): paths for the daemon are made absolute
    here, since it resolves them on its side and insists on absolute ones."""
    def daemon_path(p: Optional[PathLike]) -> str:
        if not p:
            return ""
        text = os.path.expanduser(os.fspath(p)) if same_host else os.fspath(p)
        return os.path.abspath(text) if same_host else text

    req = pb.GenerateReproducerRequest(capture_id=cid, kind=reproducer_kind(kind),
                                       source_dir=daemon_path(source_dir),
                                       out_dir=daemon_path(out) if on_daemon else "")
    compile_commands = daemon_path(compile_commands)
    if compile_commands:
        if not pb.has_field("GenerateReproducerRequest", "compile_commands"):
            raise errors.Unimplemented("this kerncap package's protocol has no "
                                       "compile_commands; reinstall it from a newer kerncap")
        req.compile_commands = compile_commands
    if on_daemon and overwrite and pb.has_field("GenerateReproducerRequest", "force"):
        req.force = True
    return req


def project_json(frame: msg.ReproducerFile) -> Optional[ProjectManifest]:
    """The final frame's kerncap.json, when the protocol and daemon send it."""
    text = getattr(frame, "project_json", "") if pb.has_field("ReproducerFile",
                                                               "project_json") else ""
    if not text:
        return None
    try:
        return cast(ProjectManifest, json.loads(text))
    except ValueError:
        return {"unparsed": text}


class ReproStream:
    """GenerateReproducer's answer, frame by frame, for both clients (their
    only difference is `for` or `async for` over the call): file frames go to
    a ReproWriter under `out`, or, with on_daemon, are only listed (the
    daemon wrote them). finish() commits and returns the result; abort()
    leaves nothing behind (a no-op after finish())."""

    def __init__(self, capture: str, out: PathLike, on_daemon: bool, overwrite: bool) -> None:
        self.capture, self.out, self.on_daemon = capture, out, on_daemon
        self.writer = None if on_daemon else ReproWriter(out, overwrite)
        self.written_to = ""
        self.project: Optional[ProjectManifest] = None
        self.files: List[str] = []

    def add(self, frame: msg.ReproducerFile) -> None:
        if frame.written_to:
            self.written_to = frame.written_to
        self.project = project_json(frame) or self.project
        if self.writer is not None and frame.path:
            self.writer.add(frame)
        elif frame.path:
            self.files.append(frame.path)

    def finish(self) -> ReproResult:
        if self.writer is not None:
            self.files = self.writer.commit()
            self.writer = None
        return ReproResult(self.capture, self.written_to or os.fspath(self.out), self.files,
                           self.on_daemon, self.project)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            self.writer = None


def now_ms() -> int:
    return int(time.time() * 1000)


def deadline_left(deadline: Optional[float]) -> Optional[float]:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def unimplemented_repro(e: errors.KerncapError) -> errors.Unimplemented:
    return errors.Unimplemented(
        f"kerncapd cannot generate this reproducer: {e.message} (a newer kerncapd may; "
        "replay()/validate()/bench() work on the capture meanwhile)")


def code_object_format(data: bytes, path: str) -> str:
    """cubin (ELF), fatbin (magic 0xBA55ED50) or ptx (text with .version and
    .target), as kerncapctl substitute decides."""
    if data[:4] == b"\x7fELF":
        return "cubin"
    if data[:4] == b"\x50\xed\x55\xba":
        return "fatbin"
    if b".target" in data and b".version" in data:
        return "ptx"
    raise errors.InvalidArgument(
        f"{path} is neither a cubin (ELF), a fatbin nor PTX text; give format=")


def to_dict(message: Message) -> JSONObject:
    """A message as a dict under the one JSON policy (docs/JSON.md), exactly
    as kerncapctl -o json prints it."""
    from ._vocab import message_to_json
    return message_to_json(message)
