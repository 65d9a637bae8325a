"""kerncap.resident: drive `kerncap-replay serve` (resident mode) from Python.

    with ResidentServer.start("capture.kcap") as srv:
        answer = srv.evaluate("build/kernel.cubin", launch={"block": [128]}, iterations=20)

The server restores the capture once and evaluates candidate code objects
against the restored state; the wire protocol (one JSON object per line on a
Unix socket, answered in order) is defined in
reproducer/replay/serve/protocol.h. Answers are returned as the server sent
them (dicts); a request the server refuses raises ReplayError with its
message, and a candidate that faulted (the server lost its GPU context and
exits) raises ReplayError with ``context_lost`` set.

`kerncap.tune` (search over candidates) and `kerncap.mcp_server` (tools for
coding agents) are built on this.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, TypedDict, cast

from . import errors
from ._types import JSONFloat, JSONObject, JSONValue, PathLike
from .replayer import EXIT_NO_DEVICE, find_replayer


# ---- the answers (reproducer/replay/serve/protocol.h): the keys this
# package reads or documents; an answer has more (info: the served capture's
# facts), and which are present depends on the request.

class Timing(TypedDict, total=False):
    """kernel_ms / original_ms: device times of the timed launches, ms."""
    min: JSONFloat
    median: JSONFloat
    max: JSONFloat
    mean: JSONFloat
    stddev: JSONFloat
    iterations: int


class ServeRegion(TypedDict, total=False):
    """One compared region of a validation."""
    index: int
    va: str  # "0x..."
    replay_va: str
    kind: str
    name: str
    size: int
    written: bool
    dtype: str
    passed: bool
    mismatches: int
    differing: int
    nan_mismatches: int
    worst_abs: JSONFloat
    worst_rel: JSONFloat
    worst_ulp: int
    first_mismatch_offset: int
    first_mismatch: Dict[str, JSONFloat]  # expected, actual


class ServeValidation(TypedDict, total=False):
    """A comparison with the captured post-dispatch image."""
    passed: bool
    verdict: str  # "pass", "fail", "incomplete", "launch_shape_dependent"
    regions_compared: int
    regions_failing: int
    regions: List[ServeRegion]
    not_compared: List[JSONObject]
    unreachable: List[JSONObject]
    shape_probe: JSONValue  # null: no probe ran


class EvaluateAnswer(TypedDict, total=False):
    """The answer to an "evaluate" request."""
    ok: bool
    id: JSONValue
    op: str
    kernel: str
    validation: ServeValidation
    revalidation: ServeValidation
    original_validation: Dict[str, ServeValidation]  # before, after
    kernel_ms: Timing
    original_ms: Timing
    speedup: float
    speedup_pairs: Dict[str, JSONFloat]  # pairs, median, p10, p90, min, max
    validation_launch_ms: JSONFloat
    kernel_total_ms: JSONFloat
    wall_ms: JSONFloat
    overhead_ms: JSONFloat
    load_ms: JSONFloat
    restored_bytes: int
    restore_each: bool
    warmup: int
    cold_l2: bool
    l2_flush_bytes: int
    protocol: str
    persisting_l2: JSONObject
    verdicts_pass: bool
    relocation: str  # "note" or "relocated"
    moved_ranges: List[JSONObject]
    launch: JSONObject  # the launch that ran (with a "launch" override)
    warnings: List[str]

#: The answer to one request may take this long (a large capture's candidate
#: with many iterations); the server's own start-up (the restore) is waited for
#: separately.
DEFAULT_TIMEOUT = 600.0


class ServeError(errors.ReplayError):
    """The server answered ``ok: false``. ``code`` is its status code name
    (``INVALID_ARGUMENT``, ...); ``context_lost`` is true when the candidate
    faulted and the server is gone with the restored state."""

    def __init__(self, message: str, code: str = "", context_lost: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.context_lost = context_lost


class ResidentServer:
    """A running `kerncap-replay serve`, started by us (``start``) or already
    running on a socket (``attach``)."""

    def __init__(self, socket_path: str, proc: Optional["subprocess.Popen[bytes]"] = None,
                 log_path: Optional[str] = None, tmpdir: Optional[str] = None) -> None:
        self.socket_path = socket_path
        self.proc = proc
        self.log_path = log_path
        self._tmpdir = tmpdir
        self._next_id = 0

    # ---- lifetime ----

    @classmethod
    def start(cls, capture: PathLike, *, socket_path: Optional[str] = None,
              replayer: Optional[str] = None, extra_args: Sequence[str] = (),
              startup_timeout: float = 600.0, cwd: Optional[PathLike] = None) -> "ResidentServer":
        """Starts ``kerncap-replay serve CAPTURE --socket=...`` and waits until it
        listens. NoDevice when the replayer says there is no GPU (exit 77),
        ReplayError with its log's tail for any other early exit."""
        exe = replayer or find_replayer()
        tmpdir = None
        if socket_path is None:
            # Unix socket paths are limited to 107 bytes: keep it short.
            tmpdir = tempfile.mkdtemp(prefix="kc-serve-", dir="/tmp")
            socket_path = os.path.join(tmpdir, "serve.sock")
        log_path = socket_path + ".log"
        log = open(log_path, "wb")
        proc = subprocess.Popen([exe, "serve", os.fspath(capture), f"--socket={socket_path}",
                                 *extra_args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd)
        log.close()
        srv = cls(socket_path, proc, log_path, tmpdir)
        deadline = time.monotonic() + startup_timeout
        while True:
            rc = proc.poll()
            if rc is not None:
                tail = srv.log_tail()
                if rc == EXIT_NO_DEVICE:
                    raise errors.NoDevice(f"kerncap-replay serve: no usable GPU: {tail}")
                raise errors.ReplayError(f"kerncap-replay serve exited with {rc}: {tail}")
            if os.path.exists(socket_path):
                try:
                    srv.info(timeout=30)
                    return srv
                except (OSError, ServeError):
                    pass
            if time.monotonic() > deadline:
                srv.stop()
                raise errors.DeadlineExceeded(
                    f"kerncap-replay serve did not listen on {socket_path} within "
                    f"{startup_timeout:.0f} s: {srv.log_tail()}")
            time.sleep(0.05)

    @classmethod
    def attach(cls, socket_path: str) -> "ResidentServer":
        """A server someone else started (``make serve``: build/serve.sock)."""
        if not os.path.exists(socket_path):
            raise errors.NotFound(f"no resident server socket at {socket_path} (make serve starts one)")
        return cls(socket_path)

    def log_tail(self, n: int = 2000) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        return Path(self.log_path).read_text(errors="replace")[-n:].strip()

    def stop(self) -> None:
        """Asks the server to shut down (ours: waits, then kills it)."""
        try:
            self.call({"op": "shutdown"}, timeout=10)
        except (OSError, ServeError, errors.KerncapError):
            pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._tmpdir:
            for name in os.listdir(self._tmpdir):
                try:
                    os.unlink(os.path.join(self._tmpdir, name))
                except OSError:
                    pass
            try:
                os.rmdir(self._tmpdir)
            except OSError:
                pass
            self._tmpdir = None

    def __enter__(self) -> "ResidentServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- requests ----

    def call(self, request: Mapping[str, object],
             timeout: Optional[float] = DEFAULT_TIMEOUT) -> JSONObject:
        """Sends one request (a JSON object: protocol.h) and returns the answer;
        ServeError when it is not ok."""
        self._next_id += 1
        message = dict(request)
        message.setdefault("id", self._next_id)
        line = (json.dumps(message) + "\n").encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(self.socket_path)
                s.sendall(line)
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
            except socket.timeout as e:
                raise errors.DeadlineExceeded(
                    f"no answer from the resident server within {timeout} s") from e
        if not buf:
            raise errors.Unavailable(
                f"the resident server at {self.socket_path} closed the connection without an "
                f"answer{': ' + self.log_tail() if self.log_tail() else ''}")
        try:
            answer = cast(JSONObject, json.loads(buf.decode()))
        except ValueError as e:
            raise errors.ReplayError(f"the resident server sent something that is not JSON: {buf[:200]!r}") from e
        if not answer.get("ok", False):
            raise ServeError(cast(str, answer.get("error",
                                                  "the resident server refused the request")),
                             cast(str, answer.get("code", "")),
                             bool(answer.get("context_lost", False)))
        return answer

    def info(self, timeout: Optional[float] = 30) -> JSONObject:
        """What is being served (the capture's facts)."""
        return self.call({"op": "info"}, timeout=timeout)

    def evaluate(self, code_object: PathLike, *, launch: Optional[Mapping[str, object]] = None,
                 iterations: int = 10, warmup: int = 2, validate: bool = True,
                 compare_original: bool = False, cold_l2: bool = False,
                 tolerance: Optional[Mapping[str, object]] = None, kernel: Optional[str] = None,
                 timeout: Optional[float] = DEFAULT_TIMEOUT) -> EvaluateAnswer:
        """One candidate (a cubin, fatbin or PTX file), optionally at another
        launch configuration (protocol.h's "launch"; tolerance: its
        "tolerance" object, both sent as given); the server's answer."""
        req: Dict[str, object] = {"op": "evaluate",
                               "code_object_path": os.path.abspath(os.fspath(code_object)),
                               "iterations": int(iterations), "warmup": int(warmup),
                               "validate": bool(validate)}
        if launch:
            req["launch"] = launch
        if compare_original:
            req["compare_original"] = True
        if cold_l2:
            req["cold_l2"] = True
        if tolerance:
            req["tolerance"] = tolerance
        if kernel:
            req["kernel"] = kernel
        return cast(EvaluateAnswer, self.call(req, timeout=timeout))


def verdict(answer: EvaluateAnswer) -> str:
    """The evaluation's verdict: the validation's ("pass", "fail", "incomplete",
    "launch_shape_dependent"), "fail" when a later revalidation failed, or
    "not_validated"."""
    v = answer.get("validation")
    if not v:
        return "not_validated"
    first = v.get("verdict", "fail")
    if first != "pass":
        return first
    if not answer.get("verdicts_pass", False):
        return "fail"
    return "pass"
