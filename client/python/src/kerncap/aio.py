"""asyncio client (grpc.aio): the same methods as kerncap.Client, as
coroutines (live substitution, substitute() and its companions, is sync
only for now).

    import kerncap.aio
    async with kerncap.aio.connect() as c:
        arm = await c.arm(kernel="matmul")
        cap = await c.wait_for_capture(arm, timeout=60)
        async for event in c.watch():
            ...
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from typing import (TYPE_CHECKING, AsyncIterator, Awaitable, Iterator, List, Mapping, Optional,
                    Protocol, Sequence, Tuple, Type, TypeVar, Union, cast)

import grpc
import grpc.aio
from google.protobuf.message import Message

from . import _connection, _ops, _progress, errors
from . import replayer as _replayer
from ._pb import pb
from ._types import (ArmRef, CaptureRef, ChannelOption, Duration, Expiry, Instant, MatchKind,
                     PathLike, PerShapeMode, ProgressArg, RegionDtypes, ReplaySource, ReproKind,
                     TagFilter)
from .capture import Capture
from .client import _DEFAULT, _Default, _Stubs
from .models import (Agent, AgentList, Arm, ArmList, CaptureList, CaptureSummary, DaemonStatus,
                     Event, ExportResult, GcReport, ImportResult, KernelList, ReproResult,
                     VerifyProblem, VerifyReport)

if TYPE_CHECKING:
    from . import _messages as msg

R = TypeVar("R")  # a call's response: its message class, or bytes (raw)
R_co = TypeVar("R_co", covariant=True)


class _AsyncResponseStream(Protocol[R_co]):
    """A server-streaming grpc.aio call."""

    def __aiter__(self) -> AsyncIterator[R_co]: ...

    def cancel(self) -> bool: ...

    def initial_metadata(self) -> Awaitable[object]: ...


@contextlib.contextmanager
def _translate(where: str) -> Iterator[None]:
    try:
        yield
    except grpc.RpcError as e:  # grpc.aio.AioRpcError derives from it
        err = errors.from_rpc_error(e, where)
        err.rpc_error = e  # type: ignore[attr-defined]
        raise err from None


class AsyncClient:
    """A grpc.aio connection to one kerncapd; create it inside the event
    loop that uses it."""

    def __init__(self, spec: _connection.ChannelSpec, timeout: Optional[float]) -> None:
        self._spec = spec
        self.endpoint = spec.endpoint
        self.timeout = timeout
        if spec.credentials is None:
            self._channel = grpc.aio.insecure_channel(spec.endpoint.grpc_target,
                                                      options=spec.options)
        else:
            self._channel = grpc.aio.secure_channel(spec.endpoint.grpc_target, spec.credentials,
                                                    options=spec.options)
        self._stubs = _Stubs(self._channel)

    @property
    def where(self) -> str:
        return self.endpoint.where

    async def _unary(self, name: str, request: Message, response: Type[R],
                     timeout: Union[float, None, _Default] = _DEFAULT) -> R:
        """Calls method `name`, whose answer is a `response`."""
        t = self.timeout if isinstance(timeout, _Default) else timeout
        with _translate(self.where):
            return await cast(Awaitable[R], self._stubs.get(name)(
                request, timeout=t, metadata=self._spec.metadata))

    def _stream(self, name: str, request: Message, response: Type[R], *,
                raw_response: bool = False,
                timeout: Optional[float] = None) -> _AsyncResponseStream[R]:
        """Starts server-streaming method `name`, whose answers are `response`s
        (bytes with raw_response)."""
        return cast(_AsyncResponseStream[R], self._stubs.get(name, raw_response=raw_response)(
            request, timeout=timeout, metadata=self._spec.metadata))

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<kerncap.aio.AsyncClient {self.where}>"

    # ---- daemon, arms, captures (see kerncap.Client for the documentation) ----

    async def status(self) -> DaemonStatus:
        return DaemonStatus.from_pb(await self._unary("GetStatus", pb.GetStatusRequest(),
                                                      pb.DaemonStatus))

    async def agents(self, *, pid: Optional[int] = None,
                     wait: Optional[Duration] = None) -> AgentList:
        """As Client.agents (wait: first wait for one to connect)."""
        deadline = None if wait is None else time.monotonic() + _ops.duration_ms(wait, "wait") / 1000
        while True:
            resp = await self._unary("ListAgents", pb.ListAgentsRequest(),
                                     pb.ListAgentsResponse)
            found = AgentList(Agent.from_pb(a) for a in resp.agents
                              if pid is None or a.process.pid == pid)
            if found or deadline is None or time.monotonic() >= deadline:
                return found
            await asyncio.sleep(min(_ops.AGENT_POLL_S, max(0.0, deadline - time.monotonic())))

    async def kernels(self, *, pid: Optional[int] = None, process: Optional[str] = None,
                      agent: Optional[str] = None, kernel: Optional[str] = None,
                      match: Optional[MatchKind] = None,
                      sample: Optional[Duration] = None) -> KernelList:
        req = _ops.list_kernels_request(pid, process, agent, sample)
        timeout = self.timeout
        if timeout is not None and req.sample_ms:
            timeout += req.sample_ms / 1000  # kerncapd holds the call for the sample
        return _ops.kernel_list(
            await self._unary("ListKernels", req, pb.ListKernelsResponse, timeout=timeout),
            kernel, match)

    async def arm(self, kernel: Optional[str] = None, *, mangled: Optional[str] = None,
                  match: Optional[MatchKind] = None, pid: Optional[int] = None,
                  process: Optional[str] = None, device: Optional[int] = None,
                  skip: Optional[int] = None, nth: Optional[int] = None,
                  count: Optional[int] = None, expires: Optional[Expiry] = None,
                  ttl: Optional[Duration] = None,
                  tags: Optional[Mapping[str, str]] = None, rank: Optional[int] = None,
                  per_shape: Union[bool, PerShapeMode, None] = None) -> Arm:
        req = _ops.arm_request(kernel, mangled=mangled, match=match, pid=pid, process=process,
                               device=device, skip=skip, nth=nth, count=count, expires=expires,
                               ttl=ttl, tags=tags, rank=rank, per_shape=per_shape)
        return Arm.from_pb(await self._unary("Arm", req, pb.ArmInfo))

    async def disarm(self, arm_id: Optional[ArmRef] = None, *,
                     all: Optional[bool] = None) -> ArmList:  # noqa: A002
        resp = await self._unary("Disarm", _ops.disarm_request(arm_id, all), pb.DisarmResponse)
        return ArmList(Arm.from_pb(a) for a in resp.disarmed)

    async def arms(self, all: bool = False) -> ArmList:  # noqa: A002
        resp = await self._unary("ListArms", pb.ListArmsRequest(include_finished=all),
                                 pb.ListArmsResponse)
        return ArmList(Arm.from_pb(a) for a in resp.arms)

    async def captures(self, kernel: Optional[str] = None, *, pid: Optional[int] = None,
                       tag: Optional[TagFilter] = None,
                       limit: Optional[int] = None) -> CaptureList:
        resp = await self._unary("ListCaptures",
                                 _ops.list_captures_request(kernel, pid, tag, limit),
                                 pb.ListCapturesResponse)
        return CaptureList(CaptureSummary.from_pb(c) for c in resp.captures)

    async def capture(self, capture_id: CaptureRef) -> Capture:
        req = pb.GetCaptureRequest(capture_id=_ops.capture_id(capture_id))
        return Capture.from_detail(await self._unary("GetCapture", req, pb.CaptureDetail))

    async def delete(self, capture_id: CaptureRef) -> str:
        req = pb.DeleteCaptureRequest(capture_id=_ops.capture_id(capture_id))
        return (await self._unary("DeleteCapture", req, pb.DeleteCaptureResponse)).capture_id

    async def gc(self, dry_run: bool = False) -> GcReport:
        return GcReport.from_pb(await self._unary("RunGc", pb.RunGcRequest(dry_run=dry_run),
                                                  pb.GcReport, timeout=None))

    async def verify(self, capture_id: Optional[CaptureRef] = None, *, rehash: bool = False,
                     progress: ProgressArg = None) -> VerifyReport:
        req = pb.VerifyStoreRequest(capture_id=_ops.capture_id(capture_id) if capture_id else "",
                                    rehash=rehash)
        bar = _progress.make(progress, "verify", 0, unit_bytes=False)
        checked = total = 0
        problems: List[VerifyProblem] = []
        try:
            with _translate(self.where):
                async for p in self._stream("VerifyStore", req, pb.VerifyProgress):
                    checked, total = p.chunks_checked, p.chunks_total
                    bar.set_total(total)
                    bar.update(checked)
                    problems += [VerifyProblem(x.capture_id, x.chunk_digest.hex(), x.pack, x.what)
                                 for x in p.problems]
        finally:
            bar.close()
        return VerifyReport(checked, total, problems)

    # ---- events ----

    async def watch(self, timeout: Optional[float] = None) -> AsyncIterator[Event]:
        call = self._stream("WatchEvents", pb.WatchEventsRequest(), pb.Event, timeout=timeout)
        try:
            with _translate(self.where):
                try:
                    async for e in call:
                        yield Event.from_pb(e)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                        raise
        finally:
            call.cancel()

    async def wait_for_capture(self, arm_id: Optional[ArmRef] = None,
                               kernel: Optional[str] = None, timeout: Optional[float] = 60.0, *,
                               since: Optional[Instant] = None,
                               poll_interval: float = 0.5, raise_on_failure: bool = True,
                               use_events: bool = True) -> Capture:
        """See kerncap.Client.wait_for_capture."""
        import time
        waiter = _ops.Waiter(_ops.arm_id_of(arm_id) if arm_id is not None else None, kernel,
                             _ops.unix_ms(since, "since") if since is not None else None,
                             raise_on_failure)
        deadline = None if timeout is None else time.monotonic() + timeout
        call = None
        if use_events:
            call = self._stream("WatchEvents", pb.WatchEventsRequest(), pb.Event, timeout=timeout)
            try:
                await call.initial_metadata()
            except grpc.RpcError as e:
                call.cancel()
                call = None
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise errors.from_rpc_error(e, self.where) from None
        try:
            found = await self._poll_state(waiter)
            if found:
                return await self.capture(found)
            if call is not None:
                with _translate(self.where):
                    try:
                        async for event in call:
                            found = waiter.on_event(event)
                            if found:
                                return await self.capture(found)
                    except grpc.RpcError as e:
                        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                            raise waiter.timeout_error(timeout) from None
                        if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                            raise
            while True:
                left = _ops.deadline_left(deadline)
                if left is not None and left <= 0:
                    raise waiter.timeout_error(timeout)
                await asyncio.sleep(poll_interval if left is None else min(poll_interval, left))
                found = await self._poll_state(waiter)
                if found:
                    return await self.capture(found)
        finally:
            if call is not None:
                call.cancel()

    async def _poll_state(self, waiter: _ops.Waiter) -> Optional[str]:
        arms = (await self._unary("ListArms", pb.ListArmsRequest(include_finished=True),
                                  pb.ListArmsResponse)).arms if waiter.arm_id else None
        caps = (await self._unary("ListCaptures", pb.ListCapturesRequest(
            kernel_contains=waiter.kernel or ""), pb.ListCapturesResponse)).captures
        return waiter.check_state(arms, list(caps))

    # ---- transfers ----

    async def export(self, capture_id: CaptureRef, path: PathLike, *,
                     progress: ProgressArg = None) -> ExportResult:
        req = pb.ExportCaptureRequest(capture_id=_ops.capture_id(capture_id))
        from .kcap import KcapWriter
        with KcapWriter(path) as writer:
            sink = _ops.ExportSink(writer, progress)
            call = self._stream("ExportCapture", req, bytes, raw_response=True)
            try:
                with _translate(self.where):
                    async for payload in call:
                        sink.add(payload)
                return sink.finish(path)
            except BaseException:
                call.cancel()
                raise
            finally:
                sink.close()

    async def import_kcap(self, path: PathLike, *, progress: ProgressArg = None) -> ImportResult:
        if os.path.isdir(path):
            req = pb.ImportReferenceCaptureRequest(path=os.path.realpath(path))
            return ImportResult.from_pb(await self._unary("ImportReferenceCapture", req,
                                                          pb.ImportCaptureResponse, timeout=None))
        source = _ops.ImportSource(path, progress)

        async def frames() -> AsyncIterator[bytes]:
            for payload in source.payloads():
                yield payload

        try:
            call = self._stubs.get("ImportCapture", raw_request=True)
            try:
                resp = await cast(Awaitable["msg.ImportCaptureResponse"],
                                  call(frames(), metadata=self._spec.metadata))
            except grpc.RpcError as e:
                failed = source.failed()
                if failed is not None:
                    raise failed from None
                raise errors.from_rpc_error(e, self.where) from None
            except (asyncio.CancelledError, errors.KerncapError):
                # grpc.aio ends the call as cancelled when the request iterator
                # raises (some versions re-raise its exception instead): report
                # the file's problem; a genuine cancellation propagates.
                failed = source.failed()
                if failed is not None:
                    raise failed from None
                raise
            return ImportResult.from_pb(resp)
        finally:
            source.close()

    async def repro(self, capture_id: CaptureRef, out: PathLike, *,
                    kind: Optional[ReproKind] = None,
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
                    async for f in call:
                        answer.add(f)
            except errors.Unimplemented as e:
                raise _ops.unimplemented_repro(e) from None
            return answer.finish()
        except BaseException:
            call.cancel()
            raise
        finally:
            answer.abort()

    # ---- replay ----

    @contextlib.asynccontextmanager
    async def _replay_source(self,
                             capture: ReplaySource) -> AsyncIterator[Tuple[str, Optional[str]]]:
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
            await self.export(cid, tmp, progress=False)
            yield tmp, None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    async def replay(self, capture: ReplaySource, *, device: Optional[int] = None,
                     relocate: Optional[bool] = None, timeout: Optional[float] = None,
                     extra_flags: Sequence[str] = ()) -> _replayer.ReplayResult:
        async with self._replay_source(capture) as (src, daemon):
            return await _replayer.run_replayer_async(
                "run", src, daemon=daemon, timeout=timeout,
                flags=_replayer.common_flags(device=device, relocate=relocate) + list(extra_flags))

    async def validate(self, capture: ReplaySource, *, dtype: Optional[str] = None,
                       region_dtypes: Optional[RegionDtypes] = None, atol: Optional[float] = None,
                       rtol: Optional[float] = None, ulp: Optional[int] = None,
                       nan_equal: bool = True, device: Optional[int] = None,
                       relocate: Optional[bool] = None, timeout: Optional[float] = None,
                       extra_flags: Sequence[str] = ()) -> _replayer.ValidationResult:
        flags = (_replayer.common_flags(device=device, relocate=relocate)
                 + _replayer.validate_flags(dtype=dtype, region_dtypes=region_dtypes, atol=atol,
                                            rtol=rtol, ulp=ulp, nan_equal=nan_equal)
                 + list(extra_flags))
        async with self._replay_source(capture) as (src, daemon):
            return await _replayer.run_replayer_async(  # type: ignore[return-value]
                "validate", src, daemon=daemon, flags=flags, timeout=timeout)

    async def bench(self, capture: ReplaySource, *, iterations: Optional[int] = None,
                    warmup: Optional[int] = None, cold_l2: bool = False,
                    restore_each: Optional[bool] = None, samples: bool = False,
                    device: Optional[int] = None, relocate: Optional[bool] = None,
                    timeout: Optional[float] = None,
                    extra_flags: Sequence[str] = ()) -> _replayer.BenchResult:
        flags = (_replayer.common_flags(device=device, relocate=relocate)
                 + _replayer.bench_flags(warmup=warmup, iterations=iterations, cold_l2=cold_l2,
                                         restore_each=restore_each, samples=samples)
                 + list(extra_flags))
        async with self._replay_source(capture) as (src, daemon):
            return await _replayer.run_replayer_async(  # type: ignore[return-value]
                "bench", src, daemon=daemon, flags=flags, timeout=timeout)


def connect(target: Optional[PathLike] = None, *, tls: _connection.TLSArg = None,
            token: Optional[str] = None, token_file: Optional[PathLike] = None,
            timeout: Optional[float] = 30.0, check: bool = True,
            options: Sequence[ChannelOption] = (), context: Optional[str] = None) -> AsyncClient:
    """Same arguments as kerncap.connect(); returns an AsyncClient (use
    `async with`, or `await client.close()`)."""
    spec = _connection.channel_spec(target, tls=tls, token=token, token_file=token_file,
                                    check=check, options=options, context=context)
    return AsyncClient(spec, timeout)
