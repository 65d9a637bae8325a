"""kerncap's MCP server (kerncap.mcp_server) driven by an MCP client over stdio,
against a real kerncapd with the synthetic agent (conftest.py), and, for
evaluate_candidate, a stand-in resident server (fake_serve.py)."""
from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

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


def run_session(daemon, env_extra, body):
    env = dict(os.environ, **env_extra)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "kerncap.mcp_server", f"--socket={daemon.socket}"],
                                   env=env)

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
    assert {"list_agents", "list_captures", "arm_and_wait", "show_capture",
            "generate_reproducer", "evaluate_candidate", "stop_resident"} <= set(tools)
    schema = _field(tools["arm_and_wait"], "input_schema", "inputSchema")
    assert "kernel" in schema["properties"] and "kernel" in schema.get("required", [])


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
            cap = structured(out["arm"])["capture"]
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

        out = run_session(daemon, {}, body)
    finally:
        agent.kill()
        agent.wait()
    assert out["agents"]["count"] >= 1
    a = [x for x in out["agents"]["agents"] if x["pid"] == agent.pid]
    assert a, out["agents"]
    assert not is_error(out["arm"]), text(out["arm"])
    cap = structured(out["arm"])["capture"]
    assert "softmax" in cap["kernel"] and cap["regions"]
    show = structured(out["show"])
    assert show["capture_id"] == cap["capture_id"] and show["kernel"] == cap["kernel"]
    assert show["launch"]["grid"], show["launch"]  # the capture's launch, under the JSON policy
    assert any(c["capture_id"] == cap["capture_id"] for c in structured(out["list"])["captures"])
    mine = [x for x in out["agents_after"]["agents"] if x["pid"] == agent.pid]
    if mine:  # the agent may have exited after its dispatches
        assert any("softmax" in k for k in mine[0]["captured_kernels"])
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

    out = run_session(daemon, {"KERNCAP_REPLAY": replayer}, body)
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
