"""kerncap.mcp_server: kerncap as tools for LLM coding agents (Model Context Protocol).

    python -m kerncap.mcp_server [--socket PATH | --host HOST:PORT ...]    # stdio transport

An MCP client (a coding agent) starts this as a subprocess and calls its tools:

    list_agents          live agents (processes with the kerncap agent loaded) and the
                         kernels captured from each so far
    list_kernels         the kernel census: per live agent, the kernels its process has
                         loaded (filters: pid, process, kernel pattern as arm_and_wait's)
    list_captures        captures in the store (optionally by kernel name)
    arm_and_wait         arm a capture of the next matching dispatch and wait for it
    show_capture         one capture: kernel, launch, arguments, memory regions
    generate_reproducer  a reproducer project folder for a capture
    evaluate_candidate   build (make recompile, optional flags) a candidate in a
                         reproducer and evaluate it in resident mode: validation
                         verdict, timing, speedup over the captured code object,
                         optionally at another launch configuration
    stop_resident        stop the resident replay of a reproducer
    substitute           launch a built variant instead of a kernel in the running
                         application (after a preflight validation against a capture,
                         or unchecked), optionally A/B: original and variant alternate
                         per dispatch and both device times are reported
    substitution_status  a substitution's current report (optionally waiting for it to
                         end): per agent its state, launches, device times and spread
    unsubstitute         end a substitution: the application runs the original again

Every tool returns a JSON object (structured content). A failure is an MCP tool
error whose text names what went wrong (kerncapd unreachable, capture not found,
a build error with the compiler's last lines, a candidate that faulted, no GPU,
no live agent, a missing code object, an unknown substitution).
Needs the ``mcp`` package (``pip install 'kerncap[mcp]'``). The connection
options are kerncap.connect()'s (default: the local kerncapd socket).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import datetime as _dt
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol,
                    TypedDict, TypeVar, cast)

from . import errors
from ._types import CodeObjectKind, JSONValue, MatchKind, ReproKind
from .client import Client, connect
from .resident import EvaluateAnswer, ResidentServer, ServeError, verdict

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    from ._messages import DeviceTimingJSON, SubstitutionInfoJSON

    _P = ParamSpec("_P")

# The mcp package is an optional import, and its server class moved between
# releases (the type checker sees the current one).
try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError as _ToolError
except ImportError:  # mcp 1.x
    try:
        from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef,attr-defined,unused-ignore]
        from mcp.server.fastmcp.exceptions import ToolError as _ToolError  # type: ignore[no-redef,import-not-found,unused-ignore]
    except ImportError:  # pragma: no cover - reported by main()
        _Server = None  # type: ignore[misc,assignment,unused-ignore]
        _ToolError = RuntimeError  # type: ignore[misc,assignment,unused-ignore]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., object])

# What every tool returns: a JSON object. Any, because the mcp package reads
# the tools' annotations at run time and derives each tool's advertised output
# schema from them: this one is a free-form object, which a precise type would
# change.
ToolResult = Dict[str, Any]


class _ToolServer(Protocol):
    """What is used of the mcp server object."""

    def tool(self) -> Callable[[_F], _F]: ...

    def run(self) -> None: ...


def _reported(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """Failures the caller should read become the tool's error text (an
    exception of another kind would reach the client as a bare "Error
    executing tool"): kerncap's errors with their class name, OS errors."""
    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except errors.KerncapError as e:
            raise _ToolError(f"{type(e).__name__}: {e}") from e
        except OSError as e:
            raise _ToolError(f"OSError: {e}") from e
    return wrapper


def _jsonable(v: object) -> JSONValue:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)
                if f.name != "raw"}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _timing(t: Optional[DeviceTimingJSON]) -> Optional[Dict[str, object]]:
    if not t or not t.get("samples"):
        return None
    timing: Mapping[str, object] = t
    return {k: timing.get(k) for k in ("samples", "mean_us", "stddev_us", "min_us", "max_us")}


def _speedup(original: Optional[Dict[str, object]],
             variant: Optional[Dict[str, object]]) -> Optional[float]:
    """original mean / variant mean; None unless both are finite positive
    numbers (the JSON policy writes a non-finite mean as "inf" or "nan")."""
    if not original or not variant:
        return None
    o, v = original.get("mean_us"), variant.get("mean_us")
    if not isinstance(o, (int, float)) or not isinstance(v, (int, float)):
        return None
    if isinstance(o, bool) or isinstance(v, bool) or not (math.isfinite(o) and math.isfinite(v)):
        return None
    return o / v if v > 0 and o > 0 else None


def _substitution_report(info: SubstitutionInfoJSON) -> ToolResult:
    """A SubstitutionInfo (Client.substitute's dict) for the caller: the
    daemon's report as it is, and with ab, per agent the two device times
    with their spread and the speedup (original mean / variant mean)."""
    out = cast(Dict[str, object], _jsonable(info))  # (a dict stays a dict)
    if info.get("ab"):
        rows: List[Dict[str, object]] = []
        for a in info.get("agents", []):
            v, o = _timing(a.get("variant")), _timing(a.get("original"))
            rows.append({"agent_id": a.get("agent_id"), "pid": a.get("pid"),
                         "state": a.get("state"), "variant": v, "original": o,
                         "speedup": _speedup(o, v)})
        out["ab_results"] = rows
    return out


class _AgentKernels(TypedDict):
    agent_id: str
    pid: int
    process_name: str
    kernels: List[Dict[str, object]]


class KerncapTools:
    """The tools' implementation, independent of MCP (tested directly too)."""

    def __init__(self, client_factory: Callable[[], Client] = connect,
                 replayer: Optional[str] = None) -> None:
        self._client_factory = client_factory
        self._client: Optional[Client] = None
        self._replayer = replayer
        self._servers: Dict[str, ResidentServer] = {}

    def client(self) -> Client:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def close(self) -> None:
        for srv in self._servers.values():
            srv.stop()
        self._servers.clear()
        if self._client is not None:
            self._client.close()

    # ---- daemon ----

    def list_agents(self) -> ToolResult:
        c = self.client()
        agents = c.agents()
        caps = c.captures()
        out = []
        for a in agents:
            kernels = sorted({s.kernel for s in caps if s.pid == a.process.pid and s.kernel})
            out.append({"agent_id": a.agent_id, "pid": a.process.pid,
                        "process_name": a.process.process_name, "hostname": a.process.hostname,
                        "platform": a.platform, "devices": _jsonable(a.devices),
                        "connected": _jsonable(a.connected), "captures": a.captures,
                        "captured_kernels": kernels})
        return {"agents": out, "count": len(out),
                "note": "captured_kernels lists the kernels captured from each process; "
                        "list_kernels lists every kernel the processes have loaded"}

    def list_captures(self, kernel: str = "", limit: int = 50) -> ToolResult:
        caps = self.client().captures(kernel or None, limit=limit or None)
        rows = [{"capture_id": s.capture_id, "created": _jsonable(s.created), "kernel": s.kernel,
                 "mangled_name": s.mangled_name, "platform": s.platform, "pid": s.pid,
                 "process_name": s.process_name, "device": s.device, "regions": s.regions,
                 "logical_bytes": s.logical_bytes, "tags": s.tags} for s in caps]
        return {"captures": rows, "count": len(rows)}

    def arm_and_wait(self, kernel: str, match: str = "substring", pid: int = 0,
                     process: str = "", skip: int = 0, timeout_s: float = 60.0) -> ToolResult:
        if not kernel:
            raise errors.InvalidArgument("kernel: give a (part of a) kernel name to capture")
        if timeout_s <= 0 or timeout_s > 3600:
            raise errors.InvalidArgument("timeout_s must be in (0, 3600]")
        c = self.client()
        # The client checks match (and says what it takes); so for kind, format.
        arm = c.arm(kernel, match=cast(MatchKind, match), pid=pid or None, process=process or None,
                    skip=skip or None, count=1, ttl=timeout_s + 5)
        try:
            cap = c.wait_for_capture(arm, timeout=timeout_s)
        except errors.DeadlineExceeded as e:
            try:
                c.disarm(arm)
            except errors.KerncapError:
                pass
            raise errors.DeadlineExceeded(
                f"no dispatch of a kernel matching {kernel!r} ({match}) was captured within "
                f"{timeout_s:g} s; the arm was disarmed (is the application running and "
                f"launching it? list_agents shows the live processes)") from e
        return {"arm_id": arm.arm_id, "capture": _jsonable(cap.to_dict())}

    def show_capture(self, capture_id: str) -> ToolResult:
        return cast(ToolResult, _jsonable(self.client().capture(capture_id).to_dict()))

    def generate_reproducer(self, capture_id: str, out_dir: str, kind: str = "auto",
                            overwrite: bool = False, source_dir: str = "") -> ToolResult:
        r = self.client().repro(capture_id, out_dir,
                                kind=None if kind == "auto" else cast(ReproKind, kind),
                                overwrite=overwrite, source_dir=source_dir or None)
        return {"capture_id": r.capture_id, "path": os.path.abspath(r.path), "files": r.files,
                "kind": (r.project or {}).get("kind"),
                "source": (r.project or {}).get("source", {}).get("outcome"),
                "next": "edit src/, then evaluate_candidate(project_dir=path) to build, validate "
                        "and time it"}

    # ---- kernel census and live substitution ----

    def list_kernels(self, pid: int = 0, process: str = "", kernel: str = "",
                     match: str = "substring", sample_s: float = 0.0) -> ToolResult:
        c = self.client()
        listing = c.kernels(pid=pid or None, process=process or None, kernel=kernel or None,
                            match=cast(MatchKind, match) if kernel else None,
                            sample=sample_s if sample_s > 0 else None)
        by_agent: Dict[str, _AgentKernels] = {}
        for k in listing:
            a = by_agent.setdefault(k.agent_id, {"agent_id": k.agent_id, "pid": k.pid,
                                                 "process_name": k.process_name, "kernels": []})
            entry: Dict[str, object] = {"name": k.name, "mangled_name": k.mangled_name,
                                        "module": k.module}
            if k.launches is not None:
                entry["launches"] = k.launches
                entry["argument_shapes"] = k.argument_shapes
                entry["launch_configs"] = [_jsonable(cfg) for cfg in k.launch_configs]
            a["kernels"].append(entry)
        notes = [cast(Dict[str, object], _jsonable(n)) for n in listing.notes]
        if not by_agent:
            live = [a for a in c.agents()
                    if (not pid or a.process.pid == pid)
                    and (not process or process in a.process.process_name)]
            which = f" (pid={pid or 'any'}, process={process or 'any'})" if pid or process else ""
            if not live:
                raise errors.NotFound(
                    f"no live agent{which} is connected to kerncapd: start the application "
                    "with the kerncap agent loaded (list_agents shows the live processes)")
            if notes and all(n["error"] for n in notes) and len(notes) >= len(live):
                raise errors.Unavailable(
                    "no agent answered the kernel census: " + "; ".join(
                        f"pid {n['pid']} ({n['process_name']}): {n['error']}" for n in notes))
        out: ToolResult = {"agents": list(by_agent.values()), "count": len(listing),
                           "notes": notes}
        if kernel and not listing:
            out["note"] = (f"no loaded kernel matches {kernel!r} ({match}); kernels load "
                           "lazily, so one the application has not launched yet may be missing")
        return out

    def substitute(self, kernel: str, code_object: str, preflight: str = "",
                   unchecked: bool = False, match: str = "substring", pid: int = 0,
                   process: str = "", count: int = 0, ttl_s: float = 0.0,
                   ab: bool = False, format: str = "") -> ToolResult:  # noqa: A002
        if not kernel:
            raise errors.InvalidArgument("kernel: give the (part of the) name of the kernel "
                                         "to substitute")
        code = Path(code_object).expanduser()
        if not code_object or not code.is_file():
            raise errors.NotFound(f"no code object at {code_object!r}: give the path of the "
                                  "built variant (a cubin, fatbin or PTX file)")
        if ttl_s < 0 or count < 0:
            raise errors.InvalidArgument("count and ttl_s must be >= 0 (0: no limit)")
        info = self.client().substitute(kernel, code.resolve(), preflight=preflight or None,
                                        unchecked=unchecked, match=cast(MatchKind, match),
                                        pid=pid or None, process=process or None,
                                        count=count or None, ttl=ttl_s or None, ab=ab,
                                        format=cast(CodeObjectKind, format) or None)
        out = _substitution_report(info)
        out["next"] = ("substitution_status(substitution_id, wait_s) reads its launches and "
                       "device times; unsubstitute(substitution_id) ends it")
        return out

    def substitution_status(self, substitution_id: str = "", wait_s: float = 0.0,
                            include_finished: bool = False) -> ToolResult:
        c = self.client()
        if not substitution_id:
            subs = c.substitutions(all=include_finished)
            return {"substitutions": [_substitution_report(x) for x in subs],
                    "count": len(subs)}
        if wait_s < 0 or wait_s > 3600:
            raise errors.InvalidArgument("wait_s must be in [0, 3600]")
        if wait_s > 0:
            try:
                return _substitution_report(c.wait_for_substitution(substitution_id,
                                                                    timeout=wait_s))
            except errors.DeadlineExceeded:
                pass  # still live: its report so far
        return _substitution_report(c.substitution(substitution_id))

    def unsubstitute(self, substitution_id: str) -> ToolResult:
        if not substitution_id:
            raise errors.InvalidArgument("substitution_id: give the id substitute returned")
        return _substitution_report(self.client().unsubstitute(substitution_id))

    # ---- resident evaluation ----

    def _server(self, project: Path) -> ResidentServer:
        key = str(project)
        srv = self._servers.get(key)
        if srv is not None and srv.proc is not None and srv.proc.poll() is None:
            return srv
        srv = ResidentServer.start(project / "capture.kcap", replayer=self._replayer, cwd=project)
        self._servers[key] = srv
        return srv

    def evaluate_candidate(self, project_dir: str, build: bool = True, code_object: str = "",
                           extra_flags: str = "", launch: Optional[Mapping[str, object]] = None,
                           iterations: int = 20, warmup: int = 3,
                           compare_original: bool = True) -> ToolResult:
        project = Path(project_dir).resolve()
        if not (project / "kerncap.json").is_file() or not (project / "capture.kcap").is_file():
            raise errors.NotFound(f"{project} is not a reproducer folder (kerncap.json and "
                                  "capture.kcap; generate_reproducer makes one)")
        build_out = ""
        if code_object:
            code = Path(code_object)
            code = code if code.is_absolute() else project / code
        else:
            if build:
                # -B: the flags may differ from the last build's (make does
                # not track them), so the kernel is always rebuilt.
                cmd = ["make", "-B", "-C", str(project), "recompile"]
                if extra_flags:
                    flags = subprocess.run(
                        ["make", "-s", "-C", str(project), "--no-print-directory",
                         "--eval=kc-print-var: ; @echo $(FLAGS)", "kc-print-var"],
                        capture_output=True, text=True).stdout.strip()
                    cmd.append(f"FLAGS={flags} {extra_flags}")
                r = subprocess.run(cmd, capture_output=True, text=True)
                build_out = (r.stdout + r.stderr).strip()[-2000:]
                if r.returncode != 0:
                    raise errors.FailedPrecondition(
                        f"the build failed ({' '.join(shlex.quote(c) for c in cmd)}): "
                        + "\n".join(build_out.splitlines()[-15:]))
            built = subprocess.run(["make", "-s", "-C", str(project), "--no-print-directory",
                                    "--eval=kc-print-var: ; @echo $(BUILT_CODE)", "kc-print-var"],
                                   capture_output=True, text=True).stdout.strip()
            code = project / built if built else project / "build" / "kernel.cubin"
        if not code.is_file():
            raise errors.NotFound(f"no code object at {code} (build it: build=true, or name one "
                                  "with code_object)")
        srv = self._server(project)
        try:
            a = srv.evaluate(code, launch=launch or None, iterations=iterations, warmup=warmup,
                             compare_original=compare_original and iterations > 0)
        except ServeError as e:
            if e.context_lost:
                self._servers.pop(str(project), None)
                raise errors.ReplayError(
                    f"the candidate faulted on the GPU ({e}); the resident replay was lost and "
                    "will be restarted by the next evaluation") from e
            raise
        v = a.get("validation") or {}
        failing = [{"index": r.get("index"), "va": r.get("va"), "name": r.get("name"),
                    "mismatches": r.get("mismatches"), "worst_abs": r.get("worst_abs"),
                    "first_mismatch_offset": r.get("first_mismatch_offset")}
                   for r in v.get("regions", []) if not r.get("passed", True)]
        return {"verdict": verdict(a), "valid": verdict(a) == "pass",
                "code_object": str(code), "launch": a.get("launch") or "captured",
                "kernel_ms": a.get("kernel_ms"), "original_ms": a.get("original_ms"),
                "speedup": a.get("speedup"), "failing_regions": failing,
                "not_compared": v.get("not_compared", []), "shape_probe": v.get("shape_probe"),
                "warnings": a.get("warnings", []), "build_output": build_out}

    def stop_resident(self, project_dir: str) -> ToolResult:
        srv = self._servers.pop(str(Path(project_dir).resolve()), None)
        if srv is None:
            return {"stopped": False, "reason": "no resident replay of this project is running here"}
        srv.stop()
        return {"stopped": True}


def build_server(tools: KerncapTools) -> _ToolServer:
    """The MCP server over `tools`."""
    if _Server is None:
        raise errors.FailedPrecondition("the MCP server needs the mcp package: pip install mcp")
    mcp = _Server("kerncap", instructions=(
        "kerncap captures one GPU kernel dispatch from a running application and replays it "
        "in isolation. Typical loop: list_agents / list_kernels -> arm_and_wait(kernel) -> "
        "generate_reproducer(capture_id, out_dir) -> edit the sources -> "
        "evaluate_candidate(project_dir) until the verdict is pass and the speedup > 1 -> "
        "substitute(kernel, code_object, preflight=capture_id, ab=true) in the live "
        "application -> substitution_status(substitution_id, wait_s) -> unsubstitute."))

    @mcp.tool()
    @_reported
    def list_agents() -> ToolResult:
        """Live processes with the kerncap agent loaded and the kernels captured from each."""
        return tools.list_agents()

    @mcp.tool()
    @_reported
    def list_captures(kernel: str = "", limit: int = 50) -> ToolResult:
        """Captures in kerncapd's store; kernel: part of the demangled name."""
        return tools.list_captures(kernel, limit)

    @mcp.tool()
    @_reported
    def arm_and_wait(kernel: str, match: str = "substring", pid: int = 0, process: str = "",
                     skip: int = 0, timeout_s: float = 60.0) -> ToolResult:
        """Arms a capture of the next dispatch of a kernel whose demangled name matches
        (match: substring, glob, regex or mangled) and waits up to timeout_s for it."""
        return tools.arm_and_wait(kernel, match, pid, process, skip, timeout_s)

    @mcp.tool()
    @_reported
    def show_capture(capture_id: str) -> ToolResult:
        """One capture (id or unique prefix): kernel, launch, arguments, memory regions."""
        return tools.show_capture(capture_id)

    @mcp.tool()
    @_reported
    def generate_reproducer(capture_id: str, out_dir: str, kind: str = "auto",
                            overwrite: bool = False, source_dir: str = "") -> ToolResult:
        """Writes a reproducer project for a capture into out_dir (kind: auto, cuda, hip,
        triton, binary). source_dir: where the application's sources are when not at the
        paths its code object records (on kerncapd's host)."""
        return tools.generate_reproducer(capture_id, out_dir, kind, overwrite, source_dir)

    @mcp.tool()
    @_reported
    def evaluate_candidate(project_dir: str, build: bool = True, code_object: str = "",
                           extra_flags: str = "",
                           # The launch object goes to the resident replay as given;
                           # Any: the tool's input schema (a free-form object) comes
                           # from this annotation, as its output schema from ToolResult.
                           launch: Optional[Dict[str, Any]] = None,
                           iterations: int = 20, warmup: int = 3,
                           compare_original: bool = True) -> ToolResult:
        """Builds the reproducer's kernel (make recompile, extra_flags appended) or takes
        code_object, and evaluates it in resident mode against the captured outputs: verdict
        (pass / fail / incomplete / launch_shape_dependent), timing and speedup over the
        captured code object. launch: overrides such as {"block": [128], "grid": [64]}."""
        return tools.evaluate_candidate(project_dir, build, code_object, extra_flags, launch,
                                        iterations, warmup, compare_original)

    @mcp.tool()
    @_reported
    def stop_resident(project_dir: str) -> ToolResult:
        """Stops the resident replay this server started for a reproducer."""
        return tools.stop_resident(project_dir)

    @mcp.tool()
    @_reported
    def list_kernels(pid: int = 0, process: str = "", kernel: str = "",
                     match: str = "substring", sample_s: float = 0.0) -> ToolResult:
        """The kernel census: per live agent, the kernels its process has loaded (what
        arm_and_wait and substitute can select). Filters: pid, process (part of the
        process name), kernel (a pattern as arm_and_wait's; match: substring, glob, regex
        or mangled). sample_s > 0 (at most 60): first count launches for that long; each
        kernel then has launches, argument_shapes and launch_configs, the most launched
        first (what the application actually runs). notes: agents that gave no (or a
        partial) census or could not be sampled, with the reason."""
        return tools.list_kernels(pid, process, kernel, match, sample_s)

    @mcp.tool()
    @_reported
    def substitute(kernel: str, code_object: str, preflight: str = "", unchecked: bool = False,
                   match: str = "substring", pid: int = 0, process: str = "", count: int = 0,
                   ttl_s: float = 0.0, ab: bool = False,
                   format: str = "") -> ToolResult:  # noqa: A002
        """Launches the variant in code_object (a cubin, fatbin or PTX with a kernel of the
        same mangled name, e.g. a reproducer's build/kernel.cubin) instead of the matching
        kernel in the live application. preflight: a capture id to validate the variant
        against first (must pass), or unchecked=true to go live without it (a faulting
        variant breaks the application's CUDA context). count: end after this many
        substituted dispatches per agent; ttl_s: after this long (0: no limit). ab:
        original and variant alternate per dispatch and both device times are measured
        (read them with substitution_status). format: cubin, fatbin or ptx (default: from
        the file's bytes). Returns the substitution's report."""
        return tools.substitute(kernel, code_object, preflight, unchecked, match, pid, process,
                                count, ttl_s, ab, format)

    @mcp.tool()
    @_reported
    def substitution_status(substitution_id: str = "", wait_s: float = 0.0,
                            include_finished: bool = False) -> ToolResult:
        """A substitution's report: its state, per agent the state (pending, active,
        refused with the reason, ended), launches, device times (mean, stddev, min, max in
        us) and, for ab, the speedup. wait_s: wait up to this long for it to end first (its
        report so far when it has not). Without an id: every live substitution
        (include_finished: ended ones too)."""
        return tools.substitution_status(substitution_id, wait_s, include_finished)

    @mcp.tool()
    @_reported
    def unsubstitute(substitution_id: str) -> ToolResult:
        """Ends a substitution: the application launches the original kernel again.
        Returns its final report."""
        return tools.unsubstitute(substitution_id)

    return mcp


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kerncap.mcp_server",
                                 description="kerncap's MCP server (stdio transport)")
    ap.add_argument("--socket", help="kerncapd's Unix socket (default: kerncap.connect()'s)")
    ap.add_argument("--host", help="a remote kerncapd HOST:PORT (TLS options: kerncap.connect)")
    ap.add_argument("--replayer", help="the kerncap-replay binary (default: $KERNCAP_REPLAY, PATH)")
    args = ap.parse_args(argv)
    if _Server is None:
        print("kerncap.mcp_server: the mcp package is not installed (pip install mcp)",
              file=sys.stderr)
        return 2
    if args.replayer:
        # substitute's preflight validates through the Client, which finds the
        # replayer as $KERNCAP_REPLAY: the same binary as the resident replays.
        os.environ["KERNCAP_REPLAY"] = args.replayer
    target = args.host or (f"unix:{args.socket}" if args.socket else None)
    tools = KerncapTools(lambda: connect(target) if target else connect(), args.replayer)
    try:
        build_server(tools).run()
    finally:
        tools.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
