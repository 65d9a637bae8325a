"""kerncap's MCP server (kerncap.mcp_server) driven by an MCP client over stdio,
against a real kerncapd with the synthetic agent (conftest.py), and, for
evaluate_candidate, a stand-in resident server (fake_serve.py)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from conftest import write_fake_replayer
from fake_serve import write_project, write_server

mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install mcp)")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

pytestmark = pytest.mark.daemon


def _field(result, *names):
    for n in names:
        if hasattr(result, n):
            return getattr(result, n)
    return None


def structured(result):
    """The tool's JSON object (structured content, else the text content)."""
    s = _field(result, "structured_content", "structuredContent")
    if s is not None:
        return s.get("result", s) if set(s) == {"result"} else s
    return json.loads(result.content[0].text)


def is_error(result) -> bool:
    return bool(_field(result, "is_error", "isError"))


def text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def run_session(daemon, env_extra, body, workspace=None, args=None):
    """Runs `body(session)` against `python -m kerncap.mcp_server` started in
    `workspace` (its default workspace) with `args` (default: the test
    daemon's socket)."""
    env = dict(os.environ, **env_extra)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kerncap.mcp_server",
              *(args if args is not None else [f"--socket={daemon.socket}"])],
        env=env, cwd=workspace)

    async def go():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

    return asyncio.run(asyncio.wait_for(go(), timeout=120))


def test_tools_are_listed_with_their_schemas(daemon):
    async def body(s):
        return await s.list_tools()

    tools = {t.name: t for t in run_session(daemon, {}, body).tools}
    assert {"list_agents", "list_kernels", "list_captures", "arm_and_wait", "show_capture",
            "generate_reproducer", "evaluate_candidate", "stop_resident", "substitute",
            "substitution_status", "unsubstitute"} <= set(tools)
    schema = _field(tools["arm_and_wait"], "input_schema", "inputSchema")
    assert "kernel" in schema["properties"] and "kernel" in schema.get("required", [])
    schema = _field(tools["substitute"], "input_schema", "inputSchema")
    assert {"kernel", "code_object"} <= set(schema.get("required", []))
    assert {"preflight", "unchecked", "ab", "count", "ttl_s"} <= set(schema["properties"])


def test_agent_arm_capture_show_and_reproducer_through_mcp(daemon, tmpdir_short):
    agent = daemon.start_agent(kernels="softmax_f32", dispatches=3, region_mib="0.25",
                               wait_arm_ms=30000)
    try:
        async def body(s):
            out = {}
            # The agent connects to kerncapd first.
            for _ in range(100):
                r = await s.call_tool("list_agents", {})
                out["agents"] = structured(r)
                if out["agents"]["count"] > 0:
                    break
                await asyncio.sleep(0.1)
            out["arm"] = await s.call_tool("arm_and_wait", {"kernel": "softmax", "timeout_s": 30})
            cap = structured(out["arm"])
            out["show"] = await s.call_tool("show_capture", {"capture_id": cap["capture_id"][:12]})
            out["list"] = await s.call_tool("list_captures", {"kernel": "softmax"})
            out["agents_after"] = structured(await s.call_tool("list_agents", {}))
            out["repro"] = await s.call_tool("generate_reproducer", {
                "capture_id": cap["capture_id"], "out_dir": f"{tmpdir_short}/repro",
                "kind": "binary"})
            out["missing"] = await s.call_tool("show_capture", {"capture_id": "cap-000000000000"})
            out["bad_arm"] = await s.call_tool("arm_and_wait", {"kernel": "", "timeout_s": 1})
            out["no_dispatch"] = await s.call_tool("arm_and_wait",
                                                   {"kernel": "never_launched", "timeout_s": 1})
            return out

        out = run_session(daemon, {}, body, workspace=tmpdir_short)
    finally:
        agent.kill()
        agent.wait()
    assert out["agents"]["count"] >= 1
    a = [x for x in out["agents"]["agents"] if x["pid"] == agent.pid]
    assert a, out["agents"]
    assert not is_error(out["arm"]), text(out["arm"])
    arm = structured(out["arm"])
    cap = arm["capture"]["untrusted"]  # what the application reported, marked
    assert "softmax" in cap["kernel"] and cap["regions"]
    assert arm["capture_id"] == cap["capture_id"]
    show = structured(out["show"])
    assert show["capture_id"] == cap["capture_id"]
    assert show["capture"]["untrusted"]["kernel"] == cap["kernel"]
    # the capture's launch, under the JSON policy
    assert show["capture"]["untrusted"]["launch"]["grid"], show
    assert any(c["capture_id"] == cap["capture_id"] for c in structured(out["list"])["captures"])
    mine = [x for x in out["agents_after"]["agents"] if x["pid"] == agent.pid]
    if mine:  # the agent may have exited after its dispatches
        assert any("softmax" in k for k in mine[0]["captured_kernels"]["untrusted"])
    # The reproducer: a project, or a clear error when the daemon cannot make one.
    print("generate_reproducer:", text(out["repro"])[:300])
    if is_error(out["repro"]):
        assert "Error" in text(out["repro"]) and len(text(out["repro"])) > 20
    else:
        r = structured(out["repro"])
        assert os.path.isfile(os.path.join(r["path"], "kerncap.json")), r
    assert is_error(out["missing"]) and "NotFound" in text(out["missing"])
    assert is_error(out["bad_arm"]) and "kernel" in text(out["bad_arm"])
    assert is_error(out["no_dispatch"]) and "no dispatch" in text(out["no_dispatch"])


def test_evaluate_candidate_builds_validates_and_times_in_resident_mode(daemon, tmpdir_short):
    replayer = write_server(tmpdir_short)
    project = write_project(tmpdir_short)

    async def body(s):
        out = {}
        out["plain"] = await s.call_tool("evaluate_candidate", {"project_dir": project,
                                                                "iterations": 3})
        out["flags"] = await s.call_tool("evaluate_candidate", {
            "project_dir": project, "extra_flags": "-maxrregcount=64",
            "launch": {"block": [128]}, "iterations": 3})
        out["shape"] = await s.call_tool("evaluate_candidate", {
            "project_dir": project, "build": False, "code_object": "code/kernel.cubin",
            "launch": {"block": [512]}})
        out["broken"] = await s.call_tool("evaluate_candidate", {"project_dir": project,
                                                                 "extra_flags": "-bad"})
        out["fault"] = await s.call_tool("evaluate_candidate", {"project_dir": project,
                                                                "extra_flags": "-DFAULT"})
        out["after_fault"] = await s.call_tool("evaluate_candidate", {"project_dir": project})
        out["stop"] = await s.call_tool("stop_resident", {"project_dir": project})
        out["not_a_project"] = await s.call_tool("evaluate_candidate",
                                                 {"project_dir": tmpdir_short})
        return out

    out = run_session(daemon, {"KERNCAP_REPLAY": replayer}, body, workspace=tmpdir_short)
    plain = structured(out["plain"])
    assert plain["verdict"] == "pass" and plain["valid"], plain
    assert plain["kernel_ms"]["median"] == 1.0
    assert plain["code_object"].endswith("build/kernel.cubin")
    flags = structured(out["flags"])
    assert flags["valid"] and flags["kernel_ms"]["median"] == pytest.approx(0.72)
    assert flags["speedup"] == pytest.approx(1 / 0.72)
    assert "block=(128" in flags["launch"]
    shape = structured(out["shape"])
    assert shape["verdict"] == "launch_shape_dependent" and not shape["valid"]
    assert shape["shape_probe"]["captured_code_at_captured_launch"] == "pass"
    assert is_error(out["broken"]) and "Unknown option '-bad'" in text(out["broken"])
    assert is_error(out["fault"]) and "faulted" in text(out["fault"])
    assert structured(out["after_fault"])["valid"]  # a new resident replay was started
    assert structured(out["stop"])["stopped"] is True
    assert is_error(out["not_a_project"]) and "not a reproducer folder" in text(out["not_a_project"])


def _start_substituting_agent(daemon, dispatches=5000):
    """The synthetic agent offering live substitution (test_substitute.py):
    it waits for a substitution, then dispatches subst_kernel every 2 ms; its
    variant "takes" 1 us of device time and the original 2 us."""
    argv = daemon.agent_argv(kernels="subst_kernel", dispatches=dispatches, wait_arm_ms=0)
    argv += ["--substitution", "--wait-substitution-ms=20000", "--dispatch-interval-ms=2"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _census(s, pid):
    """list_kernels for this pid once the agent has connected."""
    for _ in range(200):
        r = await s.call_tool("list_kernels", {"pid": pid})
        if not is_error(r) and structured(r)["count"] > 0:
            return r
        await asyncio.sleep(0.05)
    return r


# The synthetic agent "loads" a code object that starts with
# SYNTHETIC-VARIANT; the MCP server sends only code objects by content: PTX text.
SYNTHETIC_PTX = b"SYNTHETIC-VARIANT\n.version 8.0\n.target sm_90\n"


def test_kernel_census_and_live_substitution_through_mcp(daemon, tmpdir_short):
    variant = os.path.join(tmpdir_short, "variant.ptx")
    with open(variant, "wb") as f:
        f.write(SYNTHETIC_PTX)
    # kerncapd runs the preflight itself, on its node (tests/integration
    # substitute_e2e_test covers it); here the variant goes live unchecked.
    replayer = write_fake_replayer(tmpdir_short)
    agent = _start_substituting_agent(daemon)
    try:
        async def body(s):
            out = {"census": await _census(s, agent.pid)}
            out["census_glob"] = await s.call_tool("list_kernels", {
                "process": "synthetic", "kernel": "subst_*", "match": "glob"})
            out["census_none"] = await s.call_tool("list_kernels", {
                "pid": agent.pid, "kernel": "no_such_kernel"})
            out["ab"] = await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant,
                "unchecked": True, "ab": True, "count": 4, "pid": agent.pid,
                "format": "ptx"})
            sid = structured(out["ab"])["substitution_id"]
            out["ab_done"] = await s.call_tool("substitution_status",
                                               {"substitution_id": sid, "wait_s": 30})
            out["live"] = await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant, "unchecked": True,
                "all_processes": True})
            live = structured(out["live"])["substitution_id"]
            for _ in range(200):  # the agent reports its launches every so often
                out["live_status"] = await s.call_tool("substitution_status",
                                                       {"substitution_id": live})
                a = structured(out["live_status"])["agents"]
                if a and a[0]["variant_launches"] > 0:
                    break
                await asyncio.sleep(0.05)
            out["listing"] = await s.call_tool("substitution_status", {})
            out["unsub"] = await s.call_tool("unsubstitute", {"substitution_id": live})
            out["after"] = await s.call_tool("substitution_status",
                                             {"substitution_id": live, "wait_s": 10})
            out["listing_after"] = await s.call_tool("substitution_status", {})
            return out

        out = run_session(daemon, {"KERNCAP_REPLAY": replayer}, body, workspace=tmpdir_short)
    finally:
        agent.kill()
        agent.wait()
    assert not is_error(out["census"]), text(out["census"])
    census = structured(out["census"])
    (mine,) = census["agents"]
    assert mine["pid"] == agent.pid and mine["process_name"] == {"untrusted": "synthetic_agent"}
    assert [k["name"] for k in mine["kernels"]] == [{"untrusted": "subst_kernel"}]
    assert mine["kernels"][0]["mangled_name"] == {"untrusted": "_Z12subst_kernelv"}
    glob = structured(out["census_glob"])
    assert any(k["name"]["untrusted"] == "subst_kernel" for a in glob["agents"]
               if a["pid"] == agent.pid for k in a["kernels"]), glob
    none = structured(out["census_none"])
    assert none["count"] == 0 and "no_such_kernel" in none["note"]

    assert not is_error(out["ab"]), text(out["ab"])
    ab = structured(out["ab"])
    assert ab["substitution_id"].startswith("sub-") and ab["ab"] is True
    assert ab["preflight"]["untrusted"].startswith("none")
    done = structured(out["ab_done"])
    assert done["state"] == "ended", done
    (a,) = done["agents"]
    assert a["state"] == "ended" and (a["variant_launches"], a["original_launches"]) == (4, 4)
    (r,) = done["ab_results"]
    assert r["pid"] == agent.pid
    assert r["variant"]["mean_us"] == 1.0 and r["original"]["mean_us"] == 2.0
    assert r["variant"]["samples"] == 4 and r["original"]["samples"] == 4
    assert r["variant"]["stddev_us"] == 0.0 and r["speedup"] == 2.0

    live = structured(out["live"])
    assert live["preflight"]["untrusted"].startswith("none") and "ab_results" not in live
    status = structured(out["live_status"])
    assert status["state"] == "active" and status["agents"][0]["state"] == "active", status
    assert status["agents"][0]["variant_launches"] > 0
    assert live["substitution_id"] in {x["substitution_id"]
                                       for x in structured(out["listing"])["substitutions"]}
    assert not is_error(out["unsub"]), text(out["unsub"])
    after = structured(out["after"])
    assert after["state"] == "ended", after
    assert live["substitution_id"] not in {
        x["substitution_id"] for x in structured(out["listing_after"])["substitutions"]}


def test_substitution_usage_errors_through_mcp(daemon, tmpdir_short):
    variant = os.path.join(tmpdir_short, "variant.ptx")
    with open(variant, "wb") as f:
        f.write(SYNTHETIC_PTX)
    garbage = os.path.join(tmpdir_short, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"SYNTHETIC-VARIANT")
    failing = {"command": "validate", "result": "fail", "regions_compared": 1,
               "regions_failing": 1, "region_results": [{"index": 0, "passed": False,
                                                         "va": "0x10", "name": "out"}]}
    replayer = write_fake_replayer(tmpdir_short, exit_code=8, doc=failing)

    async def body(s):
        return {
            "no_agent": await s.call_tool("list_kernels", {"pid": 1}),
            "bad_regex": await s.call_tool("list_kernels", {"kernel": "(", "match": "regex"}),
            "missing_code": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": f"{tmpdir_short}/missing.cubin",
                "unchecked": True}),
            "no_preflight": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant}),
            "not_a_code_object": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": garbage, "unchecked": True}),
            "preflight_fails": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant,
                "preflight": "cap-0123456789ab", "pid": 1}),
            "preflight_not_an_id": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant,
                "preflight": variant, "pid": 1}),
            "no_agent_offers": await s.call_tool("substitute", {
                "kernel": "subst_kernel", "code_object": variant,
                "unchecked": True, "pid": 1}),
            "unknown_unsub": await s.call_tool("unsubstitute", {"substitution_id": "sub-nope"}),
            "unknown_status": await s.call_tool("substitution_status",
                                                {"substitution_id": "sub-nope"}),
        }

    out = run_session(daemon, {"KERNCAP_REPLAY": replayer}, body, workspace=tmpdir_short)
    for name, r in out.items():
        assert is_error(r), (name, structured(r))
    assert "NotFound" in text(out["no_agent"]) and "no live agent" in text(out["no_agent"])
    assert "InvalidArgument" in text(out["bad_regex"]) and "regex" in text(out["bad_regex"])
    assert "NotFound" in text(out["missing_code"]) and "missing.cubin" in text(out["missing_code"])
    assert "InvalidArgument" in text(out["no_preflight"]) and "preflight" in text(
        out["no_preflight"])
    assert "neither a cubin" in text(out["not_a_code_object"])
    # kerncapd validates against captures it holds: an unknown one is refused.
    assert "NotFound" in text(out["preflight_fails"]), text(out["preflight_fails"])
    assert "cap-0123456789ab" in text(out["preflight_fails"])
    # Never a file to import (the sandbox).
    assert "InvalidArgument" in text(out["preflight_not_an_id"])
    assert "a capture id" in text(out["preflight_not_an_id"])
    assert "FailedPrecondition" in text(out["no_agent_offers"])
    assert "NotFound" in text(out["unknown_unsub"]) and "sub-nope" in text(out["unknown_unsub"])
    assert "NotFound" in text(out["unknown_status"])


E2E = os.path.join(os.path.dirname(__file__), "..", "..", "..", "deploy", "gpu", "mcp_e2e.py")


def _run_e2e(daemon, tmpdir_short, project):
    """deploy/gpu/mcp_e2e.py (the GPU machine's MCP driver) in its CPU dry
    run: its own kerncapd, the synthetic agent as the application."""
    logs = os.path.join(tmpdir_short, "logs")
    env = dict(os.environ)
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    build = os.path.dirname(os.path.dirname(daemon.bins["kerncapd"]))
    r = subprocess.run([sys.executable, E2E, "--synthetic", build, logs,
                        f"--replayer={write_server(tmpdir_short)}", f"--project={project}"],
                       env=env, capture_output=True, text=True, timeout=300)
    with open(os.path.join(logs, "mcp_e2e.json")) as f:
        return r, json.load(f)


def test_gpu_mcp_driver_dry_run_passes_every_step(daemon, tmpdir_short):
    r, log = _run_e2e(daemon, tmpdir_short, write_project(tmpdir_short))
    assert r.returncode == 0, r.stdout + r.stderr
    assert log["passed"] and log["failed"] == [], log["failed"]
    steps = {s["step"]: s for s in log["steps"]}
    assert ["setup", "list_tools", "list_agents", "list_kernels", "list_kernels_filtered",
            "arm_and_wait", "show_capture", "generate_reproducer", "evaluate_candidate",
            "stop_resident", "substitute", "substitution_status_ab", "unsubstitute",
            "substitution_status_ended", "application_exit"] == [s["step"] for s in log["steps"]]
    ab = steps["substitution_status_ab"]["result"]["ab_results"][0]
    assert ab["variant"]["mean_us"] == 1.0 and ab["original"]["mean_us"] == 2.0
    assert steps["evaluate_candidate"]["result"]["verdict"] == "pass"
    assert steps["substitution_status_ended"]["result"]["state"] == "ended"


def test_gpu_mcp_driver_names_the_failed_step(daemon, tmpdir_short):
    # Not a reproducer folder: evaluate_candidate fails; the rest still runs.
    r, log = _run_e2e(daemon, tmpdir_short, tmpdir_short)
    assert r.returncode == 1 and "FAILED steps: evaluate_candidate" in r.stdout, r.stdout
    assert log["failed"] == ["evaluate_candidate"], log["failed"]
    failed = [s for s in log["steps"] if s["step"] == "evaluate_candidate"][0]
    assert "not a reproducer folder" in failed["error"]
    assert {"substitute", "unsubstitute", "application_exit"} <= {
        s["step"] for s in log["steps"] if s["ok"]}


def test_ab_speedup_only_from_finite_means():
    """A non-finite device time (the JSON policy writes it as "inf"/"nan")
    gives no speedup instead of a TypeError."""
    from kerncap.mcp_server import _substitution_report
    def info(variant_mean, original_mean):
        t = lambda m: {"samples": 5, "mean_us": m, "stddev_us": 0, "min_us": 0, "max_us": 0}
        return {"ab": True, "agents": [{"agent_id": "a", "pid": 1, "state": "active",
                                        "variant": t(variant_mean),
                                        "original": t(original_mean)}]}
    assert _substitution_report(info(2.0, 3.0))["ab_results"][0]["speedup"] == 1.5
    assert _substitution_report(info("inf", 3.0))["ab_results"][0]["speedup"] is None
    assert _substitution_report(info(2.0, "nan"))["ab_results"][0]["speedup"] is None
    assert _substitution_report(info(0.0, 3.0))["ab_results"][0]["speedup"] is None


def test_extra_flags_shell_injection_is_refused_through_mcp(daemon, tmpdir_short):
    """The attack of issue 28: extra_flags="-DX=1; touch S; #" ran `touch S`
    in the project (its compiler line takes FLAGS unquoted)."""
    replayer = write_server(tmpdir_short)
    project = write_project(tmpdir_short)

    async def body(s):
        return await s.call_tool("evaluate_candidate", {
            "project_dir": project, "extra_flags": "-DX=1; touch S; #"})

    r = run_session(daemon, {"KERNCAP_REPLAY": replayer}, body, workspace=tmpdir_short)
    assert is_error(r) and "InvalidArgument" in text(r) and "extra_flags" in text(r), text(r)
    assert not os.path.exists(os.path.join(project, "S"))
    assert not os.path.exists(os.path.join(tmpdir_short, "S"))


def test_paths_outside_the_workspace_are_refused_through_mcp(daemon, tmpdir_short, captured):
    ws = os.path.join(tmpdir_short, "ws")
    os.mkdir(ws)

    async def body(s):
        return await s.call_tool("generate_reproducer", {
            "capture_id": captured["ids"][0], "out_dir": f"{tmpdir_short}/elsewhere",
            "kind": "binary"})

    r = run_session(daemon, {}, body, args=[f"--socket={daemon.socket}", f"--workspace={ws}"])
    assert is_error(r) and "outside the workspace" in text(r), text(r)
    assert not os.path.exists(f"{tmpdir_short}/elsewhere")


def _remote_context(tmpdir_short, tls_daemon, monkeypatch):
    cfg = os.path.join(tmpdir_short, "config.toml")
    with open(cfg, "w") as f:
        f.write(f'current-context = "remote"\n\n[contexts.remote]\n'
                f'host = "localhost:{tls_daemon.port}"\n'
                f'tls-ca = "{tls_daemon.cert}"\ntoken-file = "{tls_daemon.token}"\n')
    monkeypatch.setenv("KERNCAP_CONFIG", cfg)
    monkeypatch.delenv("KERNCAP_SOCKET", raising=False)


def test_mcp_server_reaches_a_tls_node_with_a_token(daemon, tls_daemon, tmpdir_short,
                                                     monkeypatch):
    """TLS and token options, or a kerncapctl context, reach a secured node;
    without the token the daemon refuses, and the tool says so."""
    async def body(s):
        for _ in range(100):  # the TCP listener comes up after the socket
            r = await s.call_tool("list_captures", {})
            if not is_error(r) or "Unavailable" not in text(r):
                return r
            await asyncio.sleep(0.1)
        return r

    host = f"localhost:{tls_daemon.port}"
    flags = run_session(daemon, {}, body, workspace=tmpdir_short,
                        args=[f"--host={host}", f"--tls-ca={tls_daemon.cert}",
                              f"--token-file={tls_daemon.token}"])
    assert not is_error(flags), text(flags)
    no_token = run_session(daemon, {}, body, workspace=tmpdir_short,
                           args=[f"--host={host}", f"--tls-ca={tls_daemon.cert}"])
    assert is_error(no_token) and "Unauthenticated" in text(no_token), text(no_token)
    _remote_context(tmpdir_short, tls_daemon, monkeypatch)
    current = run_session(daemon, {}, body, workspace=tmpdir_short, args=[])
    assert not is_error(current), text(current)
    named = run_session(daemon, {}, body, workspace=tmpdir_short, args=["--context=remote"])
    assert not is_error(named), text(named)


def test_kerncap_mcp_console_entry_point():
    from importlib import metadata
    try:
        dist = metadata.distribution("kerncap")
    except metadata.PackageNotFoundError:
        pytest.skip("kerncap is not installed (run from the source tree)")
    (ep,) = [e for e in dist.entry_points if e.name == "kerncap-mcp"]
    assert ep.group == "console_scripts" and ep.value == "kerncap.mcp_server:main"
    script = os.path.join(os.path.dirname(sys.executable), "kerncap-mcp")
    if not os.path.exists(script):
        pytest.skip(f"no {script} (kerncap was not installed into this environment's bin)")
    r = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for opt in ("--workspace", "--context", "--tls-ca", "--token-file", "--host", "--socket",
                "--insecure", "--tls-cert", "--tls-key"):
        assert opt in r.stdout
