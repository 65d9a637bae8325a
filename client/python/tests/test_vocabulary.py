"""One JSON policy and one vocabulary for the CLI and the Python client
(docs/JSON.md, docs/EXIT_CODES.md): the Python tables must equal kerncapctl's,
and the Python JSON of a message must equal `kerncapctl -o json`'s."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

import kerncap
from kerncap import _format, _ops, _vocab
from conftest import binary


def _ctl_json(*args: str) -> dict:
    ctl = binary("kerncapctl")
    if ctl is None:
        pytest.skip("kerncapctl not built")
    r = subprocess.run([ctl, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_tables_equal_kerncapctls():
    v = _ctl_json("help", "json", "-o", "json")
    assert v["enums"] == _vocab.ENUM_NAMES
    assert v["address_fields"] == list(_vocab.ADDRESS_FIELDS)
    assert {e["name"]: e["code"] for e in v["exit_codes"]} == _vocab.EXIT_CODES
    assert v["api_version"] == "kerncap.v1"


def test_every_enum_of_the_protocol_has_names():
    for enum_type, names in _vocab.ENUM_NAMES.items():
        wrapper = getattr(kerncap.pb, enum_type.rsplit(".", 1)[1], None)
        if wrapper is None:  # nested (TextureObject.Type)
            continue
        assert set(wrapper.keys()) == set(names), enum_type


def test_sizes_read_as_kerncapctls():
    # The same cases as client/kerncapctl/output_test.cc HumanBytesTest.
    assert _format.human_bytes(0) == "0 B"
    assert _format.human_bytes(1023) == "1023 B"
    assert _format.human_bytes(1536) == "1.50 KiB"
    assert _format.human_bytes(10 << 20) == "10.0 MiB"
    assert _format.human_bytes(300 << 30) == "300 GiB"


def test_message_json_follows_the_policy():
    m = kerncap.pb.CaptureManifest(capture_id="cap-1", created_unix_ms=1764000000123,
                                   dispatch_index=2**64 - 1)
    r = m.pre.regions.add(va=0x7F3A00000000, kind=kerncap.pb.REGION_DEVICE_VMM)
    r.data.chunk_digests.append(b"\xab\x01\xff")
    m.launch.stream = 16
    j = kerncap.message_to_json(m)
    assert j["created_unix_ms"] == 1764000000123 and j["dispatch_index"] == 2**64 - 1
    assert j["pre"]["regions"][0]["va"] == "0x7f3a00000000"
    assert j["pre"]["regions"][0]["kind"] == "device_vmm"
    assert j["pre"]["regions"][0]["data"]["chunk_digests"] == ["ab01ff"]
    assert j["launch"]["stream"] == "0x10"
    assert "graph" not in j and j["source"] == "unspecified"


def test_repro_folder_gets_normal_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        w = _ops.ReproWriter(tmp_path / "proj", overwrite=False)
        frame = kerncap.pb.ReproducerFile(path="Makefile", content=b"all:\n", mode=0o644)
        w.add(frame)
        w.commit()
    finally:
        os.umask(umask)
    assert (tmp_path / "proj").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "proj" / "Makefile").read_bytes() == b"all:\n"


@pytest.mark.daemon
def test_python_json_equals_kerncapctls(client, daemon, captured):
    cid = captured["ids"][0]
    shown = _ctl_json(f"--socket={daemon.socket}", "show", cid, "-o", "json")
    cap = client.capture(cid)
    assert kerncap.message_to_json(cap.manifest) == shown["manifest"]
    listed = _ctl_json(f"--socket={daemon.socket}", "captures", "-o", "json")
    summary = next(s for s in client.captures() if s.capture_id == cid)
    assert kerncap.message_to_json(summary.raw) == next(
        c for c in listed["captures"] if c["capture_id"] == cid)
    # to_dict: the same conventions, and json.dumps takes it as is.
    d = cap.to_dict()
    json.dumps(d)
    assert d["regions"][0]["va"].startswith("0x") and d["regions"][0]["kind"] == "device"
    assert d["created_unix_ms"] == shown["manifest"]["created_unix_ms"]
    assert d["launch"]["stream"].startswith("0x")
    row = summary.to_dict()
    json.dumps(row)
    assert row["created_unix_ms"] == shown["manifest"]["created_unix_ms"]
    assert row["platform"] == "synthetic" and "raw" not in row


@pytest.mark.daemon
def test_arms_and_lists_render_as_html(client):
    arm = client.arm(kernel="never_launched_html", count=1)
    try:
        html = arm._repr_html_()
        assert "never_launched_html" in html and "<table" in html
        assert "<table" in client.arms()._repr_html_()
        assert "<table" in client.status()._repr_html_()
    finally:
        client.disarm(arm.arm_id)
