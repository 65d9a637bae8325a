"""Live substitution from Python against a real kerncapd, with the synthetic
agent (--substitution) standing in for the application: its variant "takes"
1 us of device time and the original 2 us (agent/testing/synthetic_agent.cc)."""
import subprocess
import time

import pytest

import kerncap
from kerncap import _ops


def _start_substituting_agent(daemon, dispatches=400):
    argv = daemon.agent_argv(kernels="subst_kernel", dispatches=dispatches, wait_arm_ms=0)
    argv += ["--substitution", "--wait-substitution-ms=10000", "--dispatch-interval-ms=2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while "synthetic_agent" not in daemon.ctl("agents").stdout:
        assert time.monotonic() < deadline, "the synthetic agent did not connect"
        time.sleep(0.05)
    return proc


def test_ab_substitution_reports_both_device_times(client, daemon, tmp_path):
    variant = tmp_path / "variant.cubin"
    variant.write_bytes(b"SYNTHETIC-VARIANT")
    proc = _start_substituting_agent(daemon)
    try:
        sub = client.substitute("subst_kernel", variant, unchecked=True, format="cubin", ab=True,
                                count=4, all_processes=True)
        assert sub["substitution_id"].startswith("sub-")
        assert sub["preflight"].startswith("none")
        done = client.wait_for_substitution(sub, timeout=30)
        (a,) = done["agents"]
        assert a["state"] == "ended"
        assert (a["variant_launches"], a["original_launches"]) == (4, 4)
        assert a["variant"]["samples"] == 4 and a["original"]["samples"] == 4
        assert a["variant"]["mean_us"] == 1.0 and a["original"]["mean_us"] == 2.0
        assert sub["substitution_id"] in {s["substitution_id"] for s in client.substitutions(all=True)}
        assert sub["substitution_id"] not in {s["substitution_id"] for s in client.substitutions()}
    finally:
        proc.kill()
        proc.wait()


def test_refusals_and_usage_errors(client, daemon, tmp_path):
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(b"\x7fELF but not a variant")
    with pytest.raises(kerncap.InvalidArgument, match="preflight"):
        client.substitute("k", bad)                        # neither preflight nor unchecked
    with pytest.raises(kerncap.FailedPrecondition, match="offers substitution"):
        client.substitute("k", bad, unchecked=True, all_processes=True)  # no agent offers it
    with pytest.raises(kerncap.InvalidArgument, match="all_processes"):
        client.substitute("k", bad, unchecked=True)        # names no process
    with pytest.raises(kerncap.NotFound):
        client.unsubstitute("sub-nope")
    proc = _start_substituting_agent(daemon, dispatches=100)
    try:
        sub = client.substitute("subst_kernel", bad, unchecked=True, all_processes=True)
        done = client.wait_for_substitution(sub, timeout=30)
        assert done["agents"][0]["state"] == "refused"
        assert "not a synthetic variant" in done["agents"][0]["reason"]
    finally:
        proc.kill()
        proc.wait()


def test_code_object_format():
    assert _ops.code_object_format(b"\x7fELF....", "k") == "cubin"
    assert _ops.code_object_format(b"\x50\xed\x55\xba\x01\x00", "k") == "fatbin"
    assert _ops.code_object_format(b".version 8.8\n.target sm_90\n", "k") == "ptx"
    with pytest.raises(kerncap.InvalidArgument, match="neither a cubin"):
        _ops.code_object_format(b"int main(){}", "k.cu")
