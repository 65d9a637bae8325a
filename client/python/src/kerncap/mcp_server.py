"""kerncap.mcp_server: kerncap as tools for LLM coding agents (Model Context Protocol).

    python -m kerncap.mcp_server [--socket PATH | --host HOST:PORT ...]    # stdio transport

An MCP client (a coding agent) starts this as a subprocess and calls its tools:

    list_agents          live agents (processes with the kerncap agent loaded) and the
                         kernels captured from each so far (kerncapd tracks captures, not
                         every kernel an agent ran)
    list_captures        captures in the store (optionally by kernel name)
    arm_and_wait         arm a capture of the next matching dispatch and wait for it
    show_capture         one capture: kernel, launch, arguments, memory regions
    generate_reproducer  a reproducer project folder for a capture
    evaluate_candidate   build (make recompile, optional flags) a candidate in a
                         reproducer and evaluate it in resident mode: validation
                         verdict, timing, speedup over the captured code object,
                         optionally at another launch configuration
    stop_resident        stop the resident replay of a reproducer

Every tool returns a JSON object (structured content). A failure is an MCP tool
error whose text names what went wrong (kerncapd unreachable, capture not found,
a build error with the compiler's last lines, a candidate that faulted, no GPU).
Needs the ``mcp`` package (``pip install 'kerncap[mcp]'``). The connection
options are kerncap.connect()'s (default: the local kerncapd socket).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import datetime as _dt
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import errors
from .client import Client, connect
from .resident import ResidentServer, ServeError, verdict

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError as _ToolError
except ImportError:  # mcp 1.x
    try:
        from mcp.server.fastmcp import FastMCP as _Server
        from mcp.server.fastmcp.exceptions import ToolError as _ToolError
    except ImportError:  # pragma: no cover - reported by main()
        _Server = None
        _ToolError = RuntimeError


def _reported(fn):
    """Failures the caller should read become the tool's error text (an
    exception of another kind would reach the client as a bare "Error
    executing tool"): kerncap's errors with their class name, OS errors."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except errors.KerncapError as e:
            raise _ToolError(f"{type(e).__name__}: {e}") from e
        except OSError as e:
            raise _ToolError(f"OSError: {e}") from e
    return wrapper


def _jsonable(v: Any) -> Any:
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


class KerncapTools:
    """The tools' implementation, independent of MCP (tested directly too)."""

    def __init__(self, client_factory=connect, replayer: Optional[str] = None) -> None:
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

    def list_agents(self) -> Dict[str, Any]:
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
                "note": "captured_kernels lists the kernels captured from each process; kerncapd "
                        "does not record every kernel an agent ran"}

    def list_captures(self, kernel: str = "", limit: int = 50) -> Dict[str, Any]:
        caps = self.client().captures(kernel or None, limit=limit or None)
        rows = [{"capture_id": s.capture_id, "created": _jsonable(s.created), "kernel": s.kernel,
                 "mangled_name": s.mangled_name, "platform": s.platform, "pid": s.pid,
                 "process_name": s.process_name, "device": s.device, "regions": s.regions,
                 "logical_bytes": s.logical_bytes, "tags": s.tags} for s in caps]
        return {"captures": rows, "count": len(rows)}

    def arm_and_wait(self, kernel: str, match: str = "substring", pid: int = 0,
                     process: str = "", skip: int = 0, timeout_s: float = 60.0) -> Dict[str, Any]:
        if not kernel:
            raise errors.InvalidArgument("kernel: give a (part of a) kernel name to capture")
        if timeout_s <= 0 or timeout_s > 3600:
            raise errors.InvalidArgument("timeout_s must be in (0, 3600]")
        c = self.client()
        arm = c.arm(kernel, match=match, pid=pid or None, process=process or None,
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

    def show_capture(self, capture_id: str) -> Dict[str, Any]:
        return _jsonable(self.client().capture(capture_id).to_dict())

    def generate_reproducer(self, capture_id: str, out_dir: str, kind: str = "auto",
                            overwrite: bool = False) -> Dict[str, Any]:
        r = self.client().repro(capture_id, out_dir, kind=None if kind == "auto" else kind,
                                overwrite=overwrite)
        return {"capture_id": r.capture_id, "path": os.path.abspath(r.path), "files": r.files,
                "kind": (r.project or {}).get("kind"),
                "source": (r.project or {}).get("source", {}).get("outcome"),
                "next": "edit src/, then evaluate_candidate(project_dir=path) to build, validate "
                        "and time it"}

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
                           extra_flags: str = "", launch: Optional[Dict[str, Any]] = None,
                           iterations: int = 20, warmup: int = 3,
                           compare_original: bool = True) -> Dict[str, Any]:
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

    def stop_resident(self, project_dir: str) -> Dict[str, Any]:
        srv = self._servers.pop(str(Path(project_dir).resolve()), None)
        if srv is None:
            return {"stopped": False, "reason": "no resident replay of this project is running here"}
        srv.stop()
        return {"stopped": True}


def build_server(tools: KerncapTools):
    """The MCP server over `tools`."""
    if _Server is None:
        raise errors.FailedPrecondition("the MCP server needs the mcp package: pip install mcp")
    mcp = _Server("kerncap", instructions=(
        "kerncap captures one GPU kernel dispatch from a running application and replays it "
        "in isolation. Typical loop: list_agents -> arm_and_wait(kernel) -> "
        "generate_reproducer(capture_id, out_dir) -> edit the sources -> "
        "evaluate_candidate(project_dir) until the verdict is pass and the speedup > 1."))

    @mcp.tool()
    @_reported
    def list_agents() -> Dict[str, Any]:
        """Live processes with the kerncap agent loaded and the kernels captured from each."""
        return tools.list_agents()

    @mcp.tool()
    @_reported
    def list_captures(kernel: str = "", limit: int = 50) -> Dict[str, Any]:
        """Captures in kerncapd's store; kernel: part of the demangled name."""
        return tools.list_captures(kernel, limit)

    @mcp.tool()
    @_reported
    def arm_and_wait(kernel: str, match: str = "substring", pid: int = 0, process: str = "",
                     skip: int = 0, timeout_s: float = 60.0) -> Dict[str, Any]:
        """Arms a capture of the next dispatch of a kernel whose demangled name matches
        (match: substring, glob, regex or mangled) and waits up to timeout_s for it."""
        return tools.arm_and_wait(kernel, match, pid, process, skip, timeout_s)

    @mcp.tool()
    @_reported
    def show_capture(capture_id: str) -> Dict[str, Any]:
        """One capture (id or unique prefix): kernel, launch, arguments, memory regions."""
        return tools.show_capture(capture_id)

    @mcp.tool()
    @_reported
    def generate_reproducer(capture_id: str, out_dir: str, kind: str = "auto",
                            overwrite: bool = False) -> Dict[str, Any]:
        """Writes a reproducer project for a capture into out_dir (kind: auto, cuda, hip,
        triton, binary)."""
        return tools.generate_reproducer(capture_id, out_dir, kind, overwrite)

    @mcp.tool()
    @_reported
    def evaluate_candidate(project_dir: str, build: bool = True, code_object: str = "",
                           extra_flags: str = "", launch: Optional[Dict[str, Any]] = None,
                           iterations: int = 20, warmup: int = 3,
                           compare_original: bool = True) -> Dict[str, Any]:
        """Builds the reproducer's kernel (make recompile, extra_flags appended) or takes
        code_object, and evaluates it in resident mode against the captured outputs: verdict
        (pass / fail / incomplete / launch_shape_dependent), timing and speedup over the
        captured code object. launch: overrides such as {"block": [128], "grid": [64]}."""
        return tools.evaluate_candidate(project_dir, build, code_object, extra_flags, launch,
                                        iterations, warmup, compare_original)

    @mcp.tool()
    @_reported
    def stop_resident(project_dir: str) -> Dict[str, Any]:
        """Stops the resident replay this server started for a reproducer."""
        return tools.stop_resident(project_dir)

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
    target = args.host or (f"unix:{args.socket}" if args.socket else None)
    tools = KerncapTools(lambda: connect(target) if target else connect(), args.replayer)
    try:
        build_server(tools).run()
    finally:
        tools.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
