"""The synchronous client. `kerncap.connect()` returns a Client:

    import kerncap
    c = kerncap.connect()                        # the local daemon's default socket
    arm = c.arm(kernel="matmul", count=1)
    cap = c.wait_for_capture(arm, timeout=60)    # run the application meanwhile
    cap.memory_map()                             # DataFrame (pandas) or list of dicts
    c.export(cap, "matmul.kcap")
"""
from __future__ import annotations

import contextlib
import enum
import os
import tempfile
import time
from typing import (TYPE_CHECKING, Callable, ContextManager, Dict, Iterator, List, Mapping,
                    Optional, Protocol, Sequence, Tuple, Type, TypeVar, Union, cast)

import grpc
import grpc.aio
from google.protobuf.message import Message

from . import _connection, _ops, _progress, errors
from . import replayer as _replayer
from ._pb import pb
from ._types import (ArmRef, CaptureRef, ChannelOption, CodeObjectKind, Duration, Expiry,
                     Instant, MatchKind, PathLike, PerShapeMode, ProgressArg, RegionDtypes,
                     ReplaySource, ReproKind, TagFilter)
from .capture import Capture
from .models import (AgentList, Agent, Arm, ArmList, CaptureList, CaptureSummary, DaemonStatus,
                     Event, ExportResult, GcReport, ImportResult, KernelList, ReproResult,
                     VerifyProblem, VerifyReport)

if TYPE_CHECKING:
    from . import _messages as msg
    from ._messages import SubstitutionInfoJSON

R = TypeVar("R")  # a call's response: its message class, or bytes (raw)
R_co = TypeVar("R_co", covariant=True)


class _Default(enum.Enum):
    """timeout= not given (the client's own timeout applies)."""
    TOKEN = 0


_DEFAULT = _Default.TOKEN

# A substitution: its id, or the dict substitute() returned.
SubstitutionRef = Union[str, "SubstitutionInfoJSON"]


class _ResponseStream(Protocol[R_co]):
    """A server-streaming call (grpc's call iterator)."""

    def __iter__(self) -> Iterator[R_co]: ...

    def cancel(self) -> bool: ...

    def initial_metadata(self) -> object: ...


class _Stubs:
    """Callables for every KerncapControl method, built from the service
    descriptor (so a method added to control.proto is callable at once). `raw`
    ones pass serialized bytes through untouched (.kcap relaying). Which kind
    of callable (unary or streaming, sync or grpc.aio) comes from the
    descriptor at run time: the clients' _unary/_stream give their results
    their types."""

    def __init__(self, channel: Union[grpc.Channel, grpc.aio.Channel]) -> None:
        self._channel = channel
        self._cache: Dict[Tuple[str, bool, bool], Callable[..., object]] = {}

    def get(self, name: str, raw_request: bool = False,
            raw_response: bool = False) -> Callable[..., object]:
        key = (name, raw_request, raw_response)
        fn = self._cache.get(key)
        if fn is None:
            m = pb.methods[name]
            kind = (("stream" if m.client_streaming else "unary") + "_"
                    + ("stream" if m.server_streaming else "unary"))
            fn = getattr(self._channel, kind)(
                m.path,
                request_serializer=None if raw_request else m.request.SerializeToString,
                response_deserializer=None if raw_response else m.response.FromString)
            self._cache[key] = fn
        return fn


def _translate(where: str) -> ContextManager[None]:
    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        try:
            yield
        except grpc.RpcError as e:
            err = errors.from_rpc_error(e, where)
            err.rpc_error = e  # type: ignore[attr-defined]
            raise err from None
    return ctx()


class Client:
    """A connection to one kerncapd. Thread-safe (gRPC channels are); close it
    (or use `with`) when done."""

    def __init__(self, spec: _connection.ChannelSpec, timeout: Optional[float]) -> None:
        self._spec = spec
        self.endpoint = spec.endpoint
        self.timeout = timeout
        if spec.credentials is None:
            self._channel = grpc.insecure_channel(spec.endpoint.grpc_target, options=spec.options)
        else:
            self._channel = grpc.secure_channel(spec.endpoint.grpc_target, spec.credentials,
                                                options=spec.options)
        self._stubs = _Stubs(self._channel)

    # ---- plumbing ----

    @property
    def where(self) -> str:
        """"socket /path" or "host h:p"."""
        return self.endpoint.where

    def _unary(self, name: str, request: Message, response: Type[R],
               timeout: Union[float, None, _Default] = _DEFAULT) -> R:
        """Calls method `name`, whose answer is a `response`."""
        t = self.timeout if isinstance(timeout, _Default) else timeout
        with _translate(self.where):
            return cast(R, self._stubs.get(name)(request, timeout=t,
                                                 metadata=self._spec.metadata))

    def _stream(self, name: str, request: Message, response: Type[R], *,
                raw_response: bool = False,
                timeout: Optional[float] = None) -> _ResponseStream[R]:
        """Starts server-streaming method `name`, whose answers are `response`s
        (bytes with raw_response)."""
        return cast(_ResponseStream[R], self._stubs.get(name, raw_response=raw_response)(
            request, timeout=timeout, metadata=self._spec.metadata))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<kerncap.Client {self.where}>"

    # ---- daemon ----

    def status(self) -> DaemonStatus:
        return DaemonStatus.from_pb(self._unary("GetStatus", pb.GetStatusRequest(),
                                                pb.DaemonStatus))

    def agents(self, *, pid: Optional[int] = None,
               wait: Optional[Duration] = None) -> AgentList:
        """The processes with the agent loaded that are connected to kerncapd
        now (of this `pid` only, when given).

        wait   seconds (or a timedelta / "30s"): first wait up to this long
               for at least one such agent to connect, so a listing right
               after starting the application shows it. An agent connects
               a moment after its process starts, and the CUDA agent only
               when the application initializes CUDA (cuInit: PyTorch does
               at its first CUDA operation). After `wait` it returns what is
               connected then, which may be nothing."""
        deadline = None if wait is None else time.monotonic() + _ops.duration_ms(wait, "wait") / 1000
        while True:
            resp = self._unary("ListAgents", pb.ListAgentsRequest(), pb.ListAgentsResponse)
            found = AgentList(Agent.from_pb(a) for a in resp.agents
                              if pid is None or a.process.pid == pid)
            if found or deadline is None or time.monotonic() >= deadline:
                return found
            time.sleep(min(_ops.AGENT_POLL_S, max(0.0, deadline - time.monotonic())))

    def kernels(self, *, pid: Optional[int] = None, process: Optional[str] = None,
                agent: Optional[str] = None, kernel: Optional[str] = None,
                match: Optional[MatchKind] = None,
                sample: Optional[Duration] = None) -> KernelList:
        """The kernel census: the kernels the live agents (of this pid, of
        processes whose name contains `process`, or this agent id) have
        loaded, to pick what to arm. kernel/match: only the kernels an arm
        with this pattern would select (as arm()'s; kerncapctl kernels
        --kernel). sample: first count every kernel's launches for this long
        (seconds, timedelta or "5s"; at most 60 s; kerncapctl kernels
        --sample): each kernel then says how often it ran, with which launch
        configurations and how many argument shapes, the most launched
        first. Agents that gave no census or could not be sampled are in the
        result's `notes`, with the reason."""
        req = _ops.list_kernels_request(pid, process, agent, sample)
        timeout = self.timeout
        if timeout is not None and req.sample_ms:
            timeout += req.sample_ms / 1000  # kerncapd holds the call for the sample
        return _ops.kernel_list(
            self._unary("ListKernels", req, pb.ListKernelsResponse, timeout=timeout), kernel,
            match)

    # ---- arms ----

    def arm(self, kernel: Optional[str] = None, *, mangled: Optional[str] = None,
            match: Optional[MatchKind] = None, pid: Optional[int] = None,
            process: Optional[str] = None, device: Optional[int] = None,
            skip: Optional[int] = None, nth: Optional[int] = None, count: Optional[int] = None,
            expires: Optional[Expiry] = None, ttl: Optional[Duration] = None,
            tags: Optional[Mapping[str, str]] = None, rank: Optional[int] = None,
            per_shape: Union[bool, PerShapeMode, None] = None) -> Arm:
        """Arms a capture of the next matching dispatch(es).

        kernel   name to match (per `match`: "substring" (default), "glob",
                 "regex" on the demangled name); or mangled= for an exact
                 mangled name. Empty matches every kernel.
        pid, process  only this process id / processes whose name contains this
        device   only this device ordinal
        rank     only the process of this rank in a parallel job (MPI, PMI,
                 torchrun, Slurm; read by the agent from its launcher)
        skip     let this many matching dispatches pass first
        nth      capture only the nth matching dispatch (1-based)
        count    captures to take before the arm is done (default 1; with
                 per_shape 16)
        per_shape  one capture per distinct launch shape of each process:
                 True or "scalars" (launch configuration and scalar
                 arguments), "launch" (launch configuration only)
        ttl      expire after this long (seconds, timedelta or "5m"); or
        expires  an absolute datetime / unix seconds
        tags     copied to every capture it takes
        """
        req = _ops.arm_request(kernel, mangled=mangled, match=match, pid=pid, process=process,
                               device=device, skip=skip, nth=nth, count=count, expires=expires,
                               ttl=ttl, tags=tags, rank=rank, per_shape=per_shape)
        return Arm.from_pb(self._unary("Arm", req, pb.ArmInfo))

    def disarm(self, arm_id: Optional[ArmRef] = None, *,
               all: Optional[bool] = None) -> ArmList:  # noqa: A002
        """Disarms one arm (id or Arm), or every active arm when no id is
        given. Returns the arms disarmed."""
        resp = self._unary("Disarm", _ops.disarm_request(arm_id, all), pb.DisarmResponse)
        return ArmList(Arm.from_pb(a) for a in resp.disarmed)

    def arms(self, all: bool = False) -> ArmList:  # noqa: A002
        """Active arms; all=True includes done, expired and disarmed ones."""
        resp = self._unary("ListArms", pb.ListArmsRequest(include_finished=all),
                           pb.ListArmsResponse)
        return ArmList(Arm.from_pb(a) for a in resp.arms)

    # ---- live substitution ----

    def substitute(self, kernel: str, code_object: PathLike, *,
                   preflight: Optional[ReplaySource] = None, unchecked: bool = False,
                   format: Optional[CodeObjectKind] = None,  # noqa: A002
                   match: Optional[MatchKind] = None, pid: Optional[int] = None,
                   process: Optional[str] = None, device: Optional[int] = None,
                   count: Optional[int] = None, ttl: Optional[Duration] = None,
                   ab: bool = False, code_bytes: Optional[bytes] = None,
                   all_processes: bool = False) -> SubstitutionInfoJSON:
        """Launches the variant in `code_object` (a cubin, fatbin or PTX file
        with a kernel of the same mangled name) instead of the original for
        the matching dispatches of your live processes (kerncapctl
        substitute). Only your own processes are reached (root's: all).

        preflight  a capture (id, or a .kcap file, imported first) that
                   kerncapd validates the variant against on its node
                   (kerncap-replay validate --code-object, with your rights)
                   before going live; or unchecked=True to go live without it
                   (a faulting variant breaks the application's CUDA context;
                   errors are sticky)
        all_processes  needed when neither pid nor process names one
        count      end after this many substituted dispatches per agent
        ttl        end after this long (seconds, timedelta or "5m")
        ab         alternate original and variant per dispatch, timing both
        code_bytes the code object's bytes when the caller has read them
                   already (code_object then names the file for messages)
        Returns the SubstitutionInfo as a dict (proto field names); each
        agent's state is "pending", "active", "refused" (nothing
        substituted: see its reason) or "ended". A failed preflight raises
        FailedPrecondition and substitutes nothing."""
        if (preflight is None) == (not unchecked):
            raise errors.InvalidArgument(
                "substitute: give preflight=CAPTURE (validates the variant first) or "
                "unchecked=True, not both or neither")
        path = os.fspath(code_object)
        if code_bytes is None:
            with open(path, "rb") as f:
                data = f.read()
        else:
            data = code_bytes
        fmt_name = format or _ops.code_object_format(data, path)
        preflight_capture = ""
        if preflight is not None:
            if isinstance(preflight, (str, os.PathLike)) and os.path.isfile(preflight):
                preflight_capture = self.import_kcap(preflight).capture_id
            else:
                preflight_capture = _ops.capture_id(preflight)
        sel = _ops.arm_request(kernel, match=match, pid=pid, process=process,
                               device=device).selector
        sel.count = 0
        req = pb.SubstituteRequest(selector=sel, code_object=data, format=fmt_name,
                                   name=os.path.basename(path), count=count or 0,
                                   ttl_ms=_ops.duration_ms(ttl) if ttl is not None else 0,
                                   ab=ab, preflight_capture=preflight_capture,
                                   no_preflight=unchecked, all_processes=all_processes)
        return cast("SubstitutionInfoJSON",
                    _ops.to_dict(self._unary("Substitute", req, pb.SubstitutionInfo,
                                             timeout=None)))

    def unsubstitute(self, substitution: SubstitutionRef) -> SubstitutionInfoJSON:
        """Ends a substitution (its id, or the dict substitute() returned)."""
        sid = substitution["substitution_id"] if isinstance(substitution, Mapping) else str(
            substitution)
        return cast("SubstitutionInfoJSON", _ops.to_dict(self._unary(
            "Unsubstitute", pb.UnsubstituteRequest(substitution_id=sid), pb.SubstitutionInfo)))

    def substitutions(self, all: bool = False) -> List[SubstitutionInfoJSON]:  # noqa: A002
        """Live substitutions (all=True: ended ones too), as dicts."""
        resp = self._unary("ListSubstitutions", pb.ListSubstitutionsRequest(include_finished=all),
                           pb.ListSubstitutionsResponse)
        return [cast("SubstitutionInfoJSON", _ops.to_dict(s)) for s in resp.substitutions]

    def substitution(self, substitution: SubstitutionRef) -> SubstitutionInfoJSON:
        """One substitution's current report (its id, or the dict substitute()
        returned), live or ended; NotFound when kerncapd has no such id."""
        sid = substitution["substitution_id"] if isinstance(substitution, Mapping) else str(
            substitution)
        resp = self._unary("ListSubstitutions", pb.ListSubstitutionsRequest(
            substitution_id=sid, include_finished=True), pb.ListSubstitutionsResponse)
        return cast("SubstitutionInfoJSON", _ops.to_dict(resp.substitutions[0]))

    def wait_for_substitution(self, substitution: SubstitutionRef,
                              timeout: Optional[float] = None,
                              poll: float = 0.25) -> SubstitutionInfoJSON:
        """Polls until the substitution has ended on every agent (count, ttl,
        unsubstitute, the agent gone) and returns its final figures."""
        sid = substitution["substitution_id"] if isinstance(substitution, Mapping) else str(
            substitution)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.substitution(sid)
            if info.get("state") == "ended":
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.DeadlineExceeded(
                    f"substitution {sid} still active after {timeout} s")
            time.sleep(poll)

    # ---- captures ----

    def captures(self, kernel: Optional[str] = None, *, pid: Optional[int] = None,
                 tag: Optional[TagFilter] = None, limit: Optional[int] = None) -> CaptureList:
        """Captures in the store, in kerncapd's order. kernel: the demangled
        name contains this; tag: "k=v", (k, v) or {k: v}; limit: at most this
        many (0/None: all)."""
        resp = self._unary("ListCaptures", _ops.list_captures_request(kernel, pid, tag, limit),
                           pb.ListCapturesResponse)
        return CaptureList(CaptureSummary.from_pb(c) for c in resp.captures)

    def capture(self, capture_id: CaptureRef) -> Capture:
        """Full description of one capture (id or unique prefix)."""
        req = pb.GetCaptureRequest(capture_id=_ops.capture_id(capture_id))
        return Capture.from_detail(self._unary("GetCapture", req, pb.CaptureDetail))

    def delete(self, capture_id: CaptureRef) -> str:
        """Deletes a capture; its chunks are reclaimed by gc(). Returns the full id."""
        req = pb.DeleteCaptureRequest(capture_id=_ops.capture_id(capture_id))
        return self._unary("DeleteCapture", req, pb.DeleteCaptureResponse).capture_id

    def gc(self, dry_run: bool = False) -> GcReport:
        """Reclaims the chunks no capture references any more (after delete)."""
        return GcReport.from_pb(self._unary("RunGc", pb.RunGcRequest(dry_run=dry_run), pb.GcReport,
                                            timeout=None))

    def verify(self, capture_id: Optional[CaptureRef] = None, *, rehash: bool = False,
               progress: ProgressArg = None) -> VerifyReport:
        """Checks stored bytes (one capture, or the whole store)."""
        req = pb.VerifyStoreRequest(capture_id=_ops.capture_id(capture_id) if capture_id else "",
                                    rehash=rehash)
        bar = _progress.make(progress, "verify", 0, unit_bytes=False)
        checked = total = 0
        problems: List[VerifyProblem] = []
        try:
            with _translate(self.where):
                for p in self._stream("VerifyStore", req, pb.VerifyProgress):
                    checked, total = p.chunks_checked, p.chunks_total
                    bar.set_total(total)
                    bar.update(checked)
                    problems += [VerifyProblem(x.capture_id, x.chunk_digest.hex(), x.pack, x.what)
                                 for x in p.problems]
        finally:
            bar.close()
        return VerifyReport(checked, total, problems)

    # ---- events ----

    def watch(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Daemon events as they happen (agents joining and leaving, captures
        starting, progressing, committed or failing, arms changing), until
        `timeout` seconds pass (then the iterator ends) or the caller stops."""
        call = self._stream("WatchEvents", pb.WatchEventsRequest(), pb.Event, timeout=timeout)
        try:
            with _translate(self.where):
                try:
                    for e in call:
                        yield Event.from_pb(e)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                        raise
        finally:
            call.cancel()

    def wait_for_capture(self, arm_id: Optional[ArmRef] = None, kernel: Optional[str] = None,
                         timeout: Optional[float] = 60.0, *, since: Optional[Instant] = None,
                         poll_interval: float = 0.5, raise_on_failure: bool = True,
                         use_events: bool = True) -> Capture:
        """Waits until a capture arrives and returns it.

        arm_id   (an id or the Arm from arm()): that arm's first capture,
                 including one it already took.
        kernel   a capture whose kernel name contains this; without arm_id,
                 one committed after the call (or at/after `since`, a
                 datetime or unix seconds).
        Follows WatchEvents; falls back to polling ListArms/ListCaptures every
        `poll_interval` s when the daemon's event stream is unavailable.
        Raises DeadlineExceeded after `timeout` s (None: wait forever) and
        CaptureFailed when the awaited capture fails (raise_on_failure) or the
        arm ends without one.
        """
        waiter = _ops.Waiter(_ops.arm_id_of(arm_id) if arm_id is not None else None, kernel,
                             _ops.unix_ms(since, "since") if since is not None else None,
                             raise_on_failure)
        deadline = None if timeout is None else time.monotonic() + timeout
        call = None
        if use_events:
            call = self._stream("WatchEvents", pb.WatchEventsRequest(), pb.Event, timeout=timeout)
            try:
                call.initial_metadata()  # the daemon has subscribed us: no event is missed
            except grpc.RpcError as e:
                call.cancel()
                call = None
                if e.code() not in (grpc.StatusCode.UNIMPLEMENTED,):
                    raise errors.from_rpc_error(e, self.where) from None
        try:
            found = self._poll_state(waiter)
            if found:
                return self.capture(found)
            if call is not None:
                with _translate(self.where):
                    try:
                        for event in call:
                            found = waiter.on_event(event)
                            if found:
                                return self.capture(found)
                    except grpc.RpcError as e:
                        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                            raise waiter.timeout_error(timeout) from None
                        if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                            raise
                # The stream ended (daemon shutting down, or no events): poll.
            while True:
                left = _ops.deadline_left(deadline)
                if left is not None and left <= 0:
                    raise waiter.timeout_error(timeout)
                time.sleep(poll_interval if left is None else min(poll_interval, left))
                found = self._poll_state(waiter)
                if found:
                    return self.capture(found)
        finally:
            if call is not None:
                call.cancel()

    def _poll_state(self, waiter: _ops.Waiter) -> Optional[str]:
        arms = self._unary("ListArms", pb.ListArmsRequest(include_finished=True),
                           pb.ListArmsResponse).arms if waiter.arm_id else None
        caps = self._unary("ListCaptures",
                           pb.ListCapturesRequest(kernel_contains=waiter.kernel or ""),
                           pb.ListCapturesResponse).captures
        return waiter.check_state(arms, list(caps))

    # ---- transfers ----

    def export(self, capture_id: CaptureRef, path: PathLike, *,
               progress: ProgressArg = None) -> ExportResult:
        """Writes the capture to a .kcap file (kerncapctl's format; nothing
        appears at `path` unless the whole capture arrived)."""
        req = pb.ExportCaptureRequest(capture_id=_ops.capture_id(capture_id))
        from .kcap import KcapWriter
        with KcapWriter(path) as writer:
            sink = _ops.ExportSink(writer, progress)
            call = self._stream("ExportCapture", req, bytes, raw_response=True)
            try:
                with _translate(self.where):
                    for payload in call:
                        sink.add(payload)
                return sink.finish(path)
            except BaseException:
                call.cancel()
                raise
            finally:
                sink.close()

    def import_kcap(self, path: PathLike, *, progress: ProgressArg = None) -> ImportResult:
        """Imports a .kcap file (or a reference-Kerncap capture folder on the
        daemon's host) into the store. Nothing is committed unless the whole
        file was read and checked."""
        if os.path.isdir(path):
            req = pb.ImportReferenceCaptureRequest(path=os.path.realpath(path))
            return ImportResult.from_pb(self._unary("ImportReferenceCapture", req,
                                                    pb.ImportCaptureResponse, timeout=None))
        source = _ops.ImportSource(path, progress)
        try:
            call = self._stubs.get("ImportCapture", raw_request=True)
            try:
                resp = cast("msg.ImportCaptureResponse",
                            call(source.payloads(), metadata=self._spec.metadata))
            except grpc.RpcError as e:
                failed = source.failed()
                if failed is not None:
                    raise failed from None
                raise errors.from_rpc_error(e, self.where) from None
            return ImportResult.from_pb(resp)
        finally:
            source.close()

    def repro(self, capture_id: CaptureRef, out: PathLike, *, kind: Optional[ReproKind] = None,
              source_dir: Optional[str] = None, compile_commands: Optional[str] = None,
              on_daemon: bool = False, overwrite: bool = False) -> ReproResult:
        """Generates a reproducer project (GenerateReproducer).

        The files are streamed back and written under `out` (created; it must
        be empty unless overwrite=True); with on_daemon=True the daemon writes
        the project to `out` on its own host instead (overwrite: replace a
        non-empty folder there). kind: "auto" (from the capture), "cuda",
        "hip", "triton" or "binary" (no source search). source_dir and
        compile_commands (paths on the daemon's host) help it find the
        kernel's sources. Raises Unimplemented, saying so, when the daemon
        cannot generate reproducers."""
        cid = _ops.capture_id(capture_id)
        req = _ops.repro_request(cid, out, kind=kind, source_dir=source_dir,
                                 compile_commands=compile_commands, on_daemon=on_daemon,
                                 overwrite=overwrite, same_host=self.endpoint.is_unix)
        answer = _ops.ReproStream(cid, out, on_daemon, overwrite)
        call = self._stream("GenerateReproducer", req, pb.ReproducerFile)
        try:
            try:
                with _translate(self.where):
                    for f in call:
                        answer.add(f)
            except errors.Unimplemented as e:
                raise _ops.unimplemented_repro(e) from None
            return answer.finish()
        except BaseException:
            call.cancel()
            raise
        finally:
            answer.abort()

    # ---- replay (kerncap-replay) ----

    @contextlib.contextmanager
    def _replay_source(self, capture: ReplaySource) -> Iterator[Tuple[str, Optional[str]]]:
        """(source, daemon endpoint) for kerncap-replay: a .kcap path as is;
        an id through the Unix socket, which the replayer reads itself; over
        TCP (TLS/tokens the replayer does not speak) via a temporary export."""
        if isinstance(capture, (str, os.PathLike)) and os.path.isfile(capture):
            yield os.fspath(capture), None
            return
        cid = _ops.capture_id(capture)
        if self.endpoint.is_unix:
            yield cid, self.endpoint.grpc_target
            return
        fd, tmp = tempfile.mkstemp(prefix="kerncap-replay-", suffix=".kcap")
        os.close(fd)
        try:
            self.export(cid, tmp, progress=False)
            yield tmp, None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def replay(self, capture: ReplaySource, *, device: Optional[int] = None,
               relocate: Optional[bool] = None, timeout: Optional[float] = None,
               extra_flags: Sequence[str] = ()) -> _replayer.ReplayResult:
        """Restores the capture on a GPU and launches the kernel once
        (`kerncap-replay run`). capture: id, Capture/summary, or a .kcap path.
        relocate: None (original addresses, relocation as a fallback), False
        (fail instead of relocating), True (force relocation)."""
        with self._replay_source(capture) as (src, daemon):
            return _replayer.replay(src, daemon=daemon, device=device, relocate=relocate,
                                    timeout=timeout, extra_flags=extra_flags)

    def validate(self, capture: ReplaySource, *, dtype: Optional[str] = None,
                 region_dtypes: Optional[RegionDtypes] = None, atol: Optional[float] = None,
                 rtol: Optional[float] = None, ulp: Optional[int] = None,
                 nan_equal: bool = True, device: Optional[int] = None,
                 relocate: Optional[bool] = None, timeout: Optional[float] = None,
                 extra_flags: Sequence[str] = ()) -> _replayer.ValidationResult:
        """Replays and compares every written region with the captured
        post-dispatch memory (`kerncap-replay validate`). dtype ("f32",
        "bf16", "i32", ...) applies to all regions; region_dtypes maps a
        region (address, index or name) to its dtype; atol/rtol/ulp are the
        float tolerances (integers always compare exactly). Returns a
        ValidationResult: check .passed, .failing."""
        with self._replay_source(capture) as (src, daemon):
            return _replayer.validate(src, daemon=daemon, dtype=dtype,
                                      region_dtypes=region_dtypes, atol=atol, rtol=rtol, ulp=ulp,
                                      nan_equal=nan_equal, device=device, relocate=relocate,
                                      timeout=timeout, extra_flags=extra_flags)

    def bench(self, capture: ReplaySource, *, iterations: Optional[int] = None,
              warmup: Optional[int] = None, cold_l2: bool = False,
              restore_each: Optional[bool] = None, samples: bool = False,
              device: Optional[int] = None, relocate: Optional[bool] = None,
              timeout: Optional[float] = None,
              extra_flags: Sequence[str] = ()) -> _replayer.BenchResult:
        """Times many launches with device events (`kerncap-replay bench`):
        warm-up, iterations, optional cold L2, median and spread."""
        with self._replay_source(capture) as (src, daemon):
            return _replayer.bench(src, daemon=daemon, iterations=iterations, warmup=warmup,
                                   cold_l2=cold_l2, restore_each=restore_each, samples=samples,
                                   device=device, relocate=relocate, timeout=timeout,
                                   extra_flags=extra_flags)


def connect(target: Optional[PathLike] = None, *, tls: _connection.TLSArg = None,
            token: Optional[str] = None, token_file: Optional[PathLike] = None,
            timeout: Optional[float] = 30.0, check: bool = True,
            options: Sequence[ChannelOption] = (), context: Optional[str] = None) -> Client:
    """Connects to kerncapd, choosing the daemon and its credentials as
    kerncapctl does (same flags' meaning, same environment, same contexts
    file: `kerncapctl config set-context` / `use-context`).

    target      Unix socket path, "unix:/path" or "HOST:PORT" (kerncapctl's
                --socket / --host). Default, first that applies: the
                `context`'s endpoint, $KERNCAP_SOCKET, the contexts file's
                current context, the daemon's default socket
                ($XDG_RUNTIME_DIR/kerncap/kerncapd.sock, /tmp/kerncap-$UID/...,
                /run/kerncap/kerncapd.sock as root).
    context     a context's name in the contexts file ($KERNCAP_CONFIG, else
                $XDG_CONFIG_HOME/kerncap/config.toml, else
                ~/.config/kerncap/config.toml): its host or socket, TLS files,
                token file and insecure setting (kerncapctl --context).
    tls         TCP only. None: the context's TLS files (or its insecure =
                true) when a context is in use, else TLS with the system's
                roots; kerncap.TLS(ca=..., cert=..., key=..., server_name=...)
                (or a dict of those, or a CA path); False: plaintext (daemons
                run with --insecure-tcp).
    token, token_file  bearer token for daemons run with --token-file (None:
                the context's token file, over TCP).
    timeout     seconds for each unary call (None: no deadline). Transfers
                and waits have their own.
    check       for a Unix socket, fail now (Unavailable naming the path)
                when there is no socket there.
    A context's settings apply only to the endpoint it gives (or with
    `context=` named): arguments and $KERNCAP_SOCKET beat the current context.
    """
    spec = _connection.channel_spec(target, tls=tls, token=token, token_file=token_file,
                                    check=check, options=options, context=context)
    return Client(spec, timeout)
