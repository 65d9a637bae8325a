#!/usr/bin/env python3
"""kerncap's MCP server end to end: an MCP client (the `mcp` SDK's stdio
client, as a coding agent would use it) drives `python -m kerncap.mcp_server`
against a real kerncapd and a live application, through every tool:

  list_agents        the application's agent is listed
  list_kernels       its census lists the kernel
  arm_and_wait       a capture of the kernel's next dispatch
  show_capture       the capture's kernel and regions
  generate_reproducer  a project for it
  evaluate_candidate the project's kernel rebuilt (make recompile), validated
                     and timed in resident mode (verdict pass, a time, a speedup)
  evaluate_variant   evaluate_candidate with the variant's code object (pass)
  substitute         the variant in the live application, preflight-validated
                     against the capture, A/B
  substitution_status  both device times (and their spread) read back
  unsubstitute       the substitution ends
then the application is stopped and must exit 0 (its own checks passed
while the variant ran).

    mcp_e2e.py --bundle DIR LOGS       # the GPU machine (run_mcp_gpu.sh)
    mcp_e2e.py --synthetic BUILD LOGS  # CPU dry run of this driver

--bundle: deploy/gpu/bundle.sh's layout: bin/{kerncapd,kerncap-replay},
lib/libkerncap_agent.so, gpu_tests/substitute_app (launches kc_scale_add and
checks every result; runs until a stop file exists), substitute/
substitute_variant.cubin (same results, ~20 us slower: its A/B device time
must be the larger). The sources the reproducer is generated from are this
repository's agent/cuda/gpu_tests (--source-dir), copied with the variant into the
MCP server's workspace (the only place its tools take paths from).

--synthetic: kerncapd from BUILD/bin with the synthetic agent
(agent/testing/synthetic_agent --substitution) as the application: its
variant "takes" 1 us and the original 2 us; the substitution is unchecked
(no replayer to validate with) and evaluate_candidate runs on --project
with --replayer (client/python/tests/fake_serve.py's stand-ins). It checks
this driver's logic, not the GPU.

Every step's structured result (or error) goes to LOGS/mcp_e2e.json, rewritten
after each step, with kerncapd's and the application's logs beside it. Exit
status: 0 when every step passed; 1 naming the failed steps.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


class Steps:
    """The log: one entry per step, LOGS/mcp_e2e.json rewritten after each so
    that a run cut short still leaves what it did."""

    def __init__(self, logs: Path, mode: str) -> None:
        self.path = logs / "mcp_e2e.json"
        self.doc: Dict[str, Any] = {"mode": mode, "started": time.strftime("%FT%TZ", time.gmtime()),
                                    "steps": [], "failed": []}
        self.save()

    def add(self, name: str, ok: bool, **fields: Any) -> None:
        self.doc["steps"].append({"step": name, "ok": ok, **fields})
        if not ok:
            self.doc["failed"].append(name)
        print(f"[ {'ok' if ok else 'FAILED'} ] {name}"
              + ("" if ok else f": {fields.get('error') or fields.get('problems')}"), flush=True)
        self.save()

    def save(self) -> None:
        self.doc["passed"] = not self.doc["failed"]
        self.path.write_text(json.dumps(self.doc, indent=2, default=str))


class StepFailed(Exception):
    pass


def _structured(result) -> Any:
    s = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if s is not None:
        return s.get("result", s) if set(s) == {"result"} else s
    text = " ".join(getattr(c, "text", "") for c in result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


class Driver:
    """Calls the tools and checks each answer; a check returns the problems
    it found (empty: passed)."""

    def __init__(self, session, steps: Steps) -> None:
        self.session = session
        self.steps = steps

    async def call(self, step: str, tool: str, args: Dict[str, Any],
                   check: Optional[Callable[[Any], List[str]]] = None) -> Any:
        started = time.monotonic()
        r = await self.session.call_tool(tool, args)
        took = round(time.monotonic() - started, 3)
        if _is_error(r):
            text = " ".join(getattr(c, "text", "") for c in r.content)
            self.steps.add(step, False, tool=tool, arguments=args, seconds=took, error=text)
            raise StepFailed(step)
        data = _structured(r)
        try:
            problems = check(data) if check else []
        except (KeyError, TypeError, IndexError, ValueError) as e:
            problems = [f"unexpected answer: {type(e).__name__}: {e}"]
        self.steps.add(step, not problems, tool=tool, arguments=args, seconds=took, result=data,
                       **({"problems": problems} if problems else {}))
        if problems:
            raise StepFailed(step)
        return data

    async def poll(self, step: str, tool: str, args: Dict[str, Any],
                   ready: Callable[[Any], bool], timeout_s: float,
                   check: Optional[Callable[[Any], List[str]]] = None) -> Any:
        """Calls the tool until ready(answer) (or timeout_s); logs the last
        answer as the step."""
        deadline = time.monotonic() + timeout_s
        while True:
            r = await self.session.call_tool(tool, args)
            if not _is_error(r) and ready(_structured(r)):
                break
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        extra = check or (lambda d: [])
        return await self.call(step, tool, args,
                               lambda d: ([] if ready(d) else
                                          [f"not ready within {timeout_s:g} s"]) + extra(d))


def _u(v: Any) -> Any:
    """A value the server marked {"untrusted": ...} (what the application or a
    capture reported), unwrapped."""
    assert isinstance(v, dict) and set(v) == {"untrusted"}, f"not marked untrusted: {v!r}"
    return v["untrusted"]


def _agent_of(doc: Dict[str, Any], pid: int) -> Optional[Dict[str, Any]]:
    return next((a for a in doc.get("agents", []) if a.get("pid") == pid), None)


def _ab_row(doc: Dict[str, Any]) -> Dict[str, Any]:
    return (doc.get("ab_results") or [{}])[0]


def _ab_samples(doc: Dict[str, Any]) -> int:
    r = _ab_row(doc)
    return min((r.get("variant") or {}).get("samples", 0),
               (r.get("original") or {}).get("samples", 0))


async def scenario(session, steps: Steps, cfg: Dict[str, Any]) -> None:
    d = Driver(session, steps)
    pid, kernel = cfg["pid"], cfg["kernel"]

    async def step(coro) -> Any:
        """A step whose failure the run survives (it is logged; later steps
        that need its result are skipped)."""
        try:
            return await coro
        except StepFailed:
            return None

    await d.poll("list_agents", "list_agents", {},
                 lambda doc: _agent_of(doc, pid) is not None, 60,
                 lambda doc: [] if _u(_agent_of(doc, pid)["process_name"]) == cfg["process"] else
                 [f"process_name {_agent_of(doc, pid)['process_name']!r}, not {cfg['process']!r}"])

    def has_kernel(doc):
        a = _agent_of(doc, pid)
        return a is not None and any(_u(k["name"]) == kernel for k in a["kernels"])
    # Kernels load lazily: the census lists the kernel once it has run.
    await d.poll("list_kernels", "list_kernels", {"pid": pid}, has_kernel, 60)
    await d.call("list_kernels_filtered", "list_kernels",
                 {"process": cfg["process"], "kernel": kernel, "match": "substring"},
                 lambda doc: [] if has_kernel(doc) else [f"{kernel} not in the filtered census"])

    arm = await d.call("arm_and_wait", "arm_and_wait",
                       {"kernel": kernel, "pid": pid, "timeout_s": 60},
                       lambda doc: [] if kernel in _u(doc["capture"])["kernel"] else
                       [f"captured {_u(doc['capture'])['kernel']!r}"])
    cap_id = arm["capture_id"]
    await step(d.call("show_capture", "show_capture", {"capture_id": cap_id},
                      lambda doc: ([] if doc["capture_id"] == cap_id else ["another capture"])
                      + ([] if _u(doc["capture"]).get("regions") else ["no memory regions"])))

    project = cfg.get("project")
    if project is None:
        repro_args = {"capture_id": cap_id, "out_dir": str(cfg["work"] / "repro"),
                      "kind": cfg["repro_kind"]}
        if cfg.get("source_dir"):
            repro_args["source_dir"] = str(cfg["source_dir"])
        repro = await step(d.call(
            "generate_reproducer", "generate_reproducer", repro_args,
            lambda doc: [] if Path(doc["path"], "kerncap.json").is_file() else
            ["no kerncap.json in the project"]))
        project = repro and repro["path"]
    else:
        steps.add("generate_reproducer", True, note=f"stand-in project {project} (--project)")

    def evaluated(doc) -> List[str]:
        p = [] if doc["verdict"] == "pass" and doc["valid"] else [f"verdict {doc['verdict']}"]
        if not (doc.get("kernel_ms") or {}).get("median"):
            p.append("no kernel time")
        if cfg["compare_original"] and not doc.get("speedup"):
            p.append("no speedup over the captured code object")
        return p
    if project:
        done = [await step(d.call("evaluate_candidate", "evaluate_candidate",
                                  {"project_dir": project, "build": True, "iterations": 20,
                                   "compare_original": cfg["compare_original"]}, evaluated))]
        if cfg.get("evaluate_variant"):
            done.append(await step(d.call(
                "evaluate_variant", "evaluate_candidate",
                {"project_dir": project, "build": False, "code_object": str(cfg["variant"]),
                 "iterations": 20, "compare_original": cfg["compare_original"]}, evaluated)))
        if any(done):  # a resident replay was started
            await step(d.call("stop_resident", "stop_resident", {"project_dir": project},
                              lambda doc: [] if doc.get("stopped") else ["no resident replay"]))

    sub_args = {"kernel": kernel, "code_object": str(cfg["variant"]), "pid": pid, "ab": True,
                **cfg.get("substitute_args", {})}
    if cfg["preflight"]:
        sub_args["preflight"] = cap_id
    else:
        sub_args["unchecked"] = True
    sub = await d.call("substitute", "substitute", sub_args,
                       lambda doc: ([] if doc["substitution_id"].startswith("sub-") else
                                    ["no substitution id"])
                       + ([] if not cfg["preflight"] or ": pass" in _u(doc["preflight"]) else
                          [f"preflight {doc['preflight']!r}"]))
    sid = sub["substitution_id"]
    try:
        def ab_check(doc) -> List[str]:
            a, r = doc["agents"][0], _ab_row(doc)
            p = [] if a["state"] == "active" else [
                f"agent state {a['state']} ({_u(a['reason'])})"]
            v, o = r.get("variant") or {}, r.get("original") or {}
            if not (v.get("mean_us", 0) > 0 and o.get("mean_us", 0) > 0):
                p.append("no device time for both")
            p += cfg["check_times"](v, o)
            if cfg.get("layout_check") and not any(cfg["layout_check"] in c
                                                   for c in _u(a["checks"])):
                p.append(f"no {cfg['layout_check']!r} among the agent's checks")
            return p
        await step(d.poll("substitution_status_ab", "substitution_status",
                          {"substitution_id": sid},
                          lambda doc: _ab_samples(doc) >= cfg["ab_samples"], 120, ab_check))
    finally:
        await d.call("unsubstitute", "unsubstitute", {"substitution_id": sid},
                     lambda doc: [] if doc["substitution_id"] == sid else ["another id"])
    await d.call("substitution_status_ended", "substitution_status",
                 {"substitution_id": sid, "wait_s": 30},
                 lambda doc: [] if doc["state"] == "ended" else [f"state {doc['state']}"])


def run_mcp(steps: Steps, server_argv: List[str], env: Dict[str, str],
            cfg: Dict[str, Any], timeout_s: float = 480) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    params = StdioServerParameters(command=server_argv[0], args=server_argv[1:], env=env)

    async def go():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                want = {"list_agents", "list_kernels", "arm_and_wait", "show_capture",
                        "generate_reproducer", "evaluate_candidate", "stop_resident",
                        "substitute", "substitution_status", "unsubstitute"}
                steps.add("list_tools", want <= tools, tools=sorted(tools),
                          **({"problems": [f"missing {sorted(want - tools)}"]}
                             if not want <= tools else {}))
                try:
                    await scenario(session, steps, cfg)
                except StepFailed:
                    pass  # logged; the steps after it needed its result

    try:
        asyncio.run(asyncio.wait_for(go(), timeout=timeout_s))
    except Exception as e:  # the session itself broke (server crashed, timeout)
        steps.add("mcp_session", False, error=f"{type(e).__name__}: {e}")


def wait_socket(proc: subprocess.Popen, sock: Path, what: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()}):\n"
                               + log.read_text(errors="replace")[-3000:])
        time.sleep(0.05)


def stop(proc: Optional[subprocess.Popen], sig: int = signal.SIGTERM, wait_s: float = 15) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", type=Path)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bundle", type=Path, help="the GPU bundle (.bundle)")
    mode.add_argument("--synthetic", type=Path, metavar="BUILD",
                      help="CPU dry run: BUILD/bin/{kerncapd,synthetic_agent}")
    ap.add_argument("--replayer", help="synthetic: the resident server stand-in")
    ap.add_argument("--project", help="synthetic: the stand-in reproducer project")
    args = ap.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    logs = args.logs.resolve()
    steps = Steps(logs, "gpu" if args.bundle else "synthetic")
    tmp = Path(tempfile.mkdtemp(prefix="kcmcp-", dir="/tmp"))  # short: Unix socket paths
    work = tmp / "work"
    work.mkdir()
    daemon = app = None
    app_out = logs / "app.log"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # timeout(1): still clean up
    try:
        root = (args.bundle or args.synthetic).resolve()
        bins = root / "bin"
        sock, agent_sock = tmp / "ctl.sock", tmp / "agent.sock"
        daemon_log = logs / "kerncapd.log"
        daemon = subprocess.Popen(
            [str(bins / "kerncapd"), f"--store={tmp / 'store'}", f"--socket={sock}",
             f"--agent-socket={agent_sock}"],
            stdout=open(daemon_log, "wb"), stderr=subprocess.STDOUT)
        wait_socket(daemon, sock, "kerncapd", daemon_log)
        env = dict(os.environ)
        for k in ("CUDA_INJECTION64_PATH", "KERNCAP_AGENT_SOCKET"):
            env.pop(k, None)  # the agent belongs in the application only
        stop_file = tmp / "stop"
        if args.bundle:
            replayer = str(bins / "kerncap-replay")
            # The MCP server takes paths only inside its workspace (work):
            # the variant and the application's sources are copied there.
            variant = work / "substitute_variant.cubin"
            shutil.copyfile(root / "substitute" / "substitute_variant.cubin", variant)
            shutil.copytree(REPO / "agent" / "cuda" / "gpu_tests", work / "sources")
            app_argv = [str(root / "gpu_tests" / "substitute_app"), "0", str(stop_file)]
            app_env = dict(env, CUDA_INJECTION64_PATH=str(root / "lib" / "libkerncap_agent.so"),
                           KERNCAP_AGENT_SOCKET=str(agent_sock))
            cfg = {"kernel": "kc_scale_add", "process": "substitute_app", "preflight": True,
                   "repro_kind": "auto", "source_dir": work / "sources",
                   "compare_original": True, "evaluate_variant": True, "ab_samples": 100,
                   "layout_check": "parameter layout",
                   # The variant spins ~20 us per block: its time must show it ran.
                   "check_times": lambda v, o: [] if v["mean_us"] > o["mean_us"] + 5 else
                   [f"variant {v['mean_us']:.2f} us is not > original {o['mean_us']:.2f} + 5 us"]}
        else:
            replayer = args.replayer or ""
            # The synthetic agent "loads" what starts with SYNTHETIC-VARIANT;
            # the MCP server sends only code objects by content: PTX text.
            variant = work / "variant.ptx"
            variant.write_bytes(b"SYNTHETIC-VARIANT\n.version 8.0\n.target sm_90\n")
            project = None
            if args.project:
                project = work / "project"
                shutil.copytree(args.project, project, symlinks=True)
            app_argv = [str(bins / "synthetic_agent"), f"--socket={agent_sock}",
                        "--kernels=subst_kernel", "--dispatches=1000000", "--region-mib=0.25",
                        "--wait-arm-ms=0", "--dispatch-interval-ms=2", "--substitution"]
            app_env = env
            cfg = {"kernel": "subst_kernel", "process": "synthetic_agent", "preflight": False,
                   "project": str(project) if project else None, "compare_original": True,
                   "ab_samples": 20,
                   "check_times": lambda v, o: [] if (v["mean_us"], o["mean_us"]) == (1.0, 2.0)
                   else [f"device times {v['mean_us']} / {o['mean_us']} us, not 1 / 2"]}
        cfg.update(work=work, variant=variant)
        if not variant.is_file():
            steps.add("setup", False, error=f"no variant code object at {variant}")
            return 1
        if replayer:
            env["KERNCAP_REPLAY"] = replayer
        app = subprocess.Popen(app_argv, env=app_env, stdout=open(app_out, "w"),
                               stderr=subprocess.STDOUT, text=True)
        cfg["pid"] = app.pid
        steps.add("setup", True, kerncapd=str(bins / "kerncapd"), socket=str(sock),
                  application=app_argv, pid=app.pid, variant=str(variant),
                  replayer=replayer or None, python=sys.version.split()[0])
        server = [sys.executable, "-m", "kerncap.mcp_server", f"--socket={sock}",
                  f"--workspace={work}"]
        if replayer:
            server.append(f"--replayer={replayer}")
        run_mcp(steps, server, env, cfg)

        # The application: still running, then stopped; on the GPU its own
        # check of every result must have passed (exit 0).
        if args.bundle:
            stop_file.write_text("stop\n")
            try:
                rc = app.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = None
            out = app_out.read_text(errors="replace")
            problems = [] if rc == 0 else [f"exit status {rc}"]
            if "every result checked OK" not in out:
                problems.append("no 'every result checked OK' in its output")
            steps.add("application_exit", not problems, exit_status=rc,
                      output_tail=out[-2000:], **({"problems": problems} if problems else {}))
        else:
            alive = app.poll() is None
            stop(app)
            steps.add("application_exit", alive, note="the synthetic agent was running until "
                      "stopped (it has no checks of its own)",
                      **({} if alive else {"problems": [f"exited early ({app.returncode})"]}))
    except Exception as e:
        steps.add("driver", False, error=f"{type(e).__name__}: {e}")
    finally:
        stop(app, signal.SIGKILL, 5)
        stop(daemon)
        shutil.rmtree(tmp, ignore_errors=True)
        steps.save()
    if steps.doc["failed"]:
        print(f"mcp_e2e: FAILED steps: {', '.join(steps.doc['failed'])} (log: {steps.path})")
        return 1
    print(f"mcp_e2e: every step passed (log: {steps.path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
