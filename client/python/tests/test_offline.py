"""Parts that need no daemon: protocol classes, targets and defaults, the
.kcap format, kerncap-replay result parsing, the Capture view of a manifest."""
from __future__ import annotations

import datetime as dt
import json
import os
import struct

import pytest

import kerncap
from kerncap import _connection, _ops, kcap
from conftest import read_fake_replayer_log, write_fake_replayer

pb = kerncap.pb


# ---- protocol classes ----

def test_protocol_classes_come_from_the_descriptor_set():
    req = pb.ArmRequest(selector=pb.Selector(kernel="matmul", match=pb.NAME_GLOB), ttl_ms=5)
    again = pb.ArmRequest.FromString(req.SerializeToString())
    assert again.selector.kernel == "matmul"
    assert pb.NameMatch.Name(again.selector.match) == "NAME_GLOB"
    assert set(pb.methods) >= {"GetStatus", "Arm", "ExportCapture", "ImportCapture",
                               "GenerateReproducer", "WatchEvents"}
    m = pb.methods["ImportCapture"]
    assert m.client_streaming and not m.server_streaming
    assert m.path == "/kerncap.v1.KerncapControl/ImportCapture"
    assert pb.has_field("ReproducerFile", "written_to")
    assert not pb.has_field("ReproducerFile", "no_such_field")


# ---- targets and defaults (common/control/default_paths.h) ----

def test_targets():
    e = _connection.parse_target("/run/kerncap/kerncapd.sock")
    assert e.is_unix and e.grpc_target == "unix:/run/kerncap/kerncapd.sock"
    assert e.where == "socket /run/kerncap/kerncapd.sock"
    assert _connection.parse_target("unix:/x/y.sock").unix_path == "/x/y.sock"
    assert _connection.parse_target("unix:rel.sock").unix_path == os.path.abspath("rel.sock")
    t = _connection.parse_target("node17:7443")
    assert not t.is_unix and t.grpc_target == "node17:7443" and t.where == "host node17:7443"
    assert _connection.parse_target("[::1]:7443").grpc_target == "[::1]:7443"
    for bad in ("node17", "node17:0", "node17:http", ":7443", ""):
        with pytest.raises(kerncap.InvalidArgument):
            _connection.parse_target(bad)


def test_default_socket_matches_the_daemon(monkeypatch):
    monkeypatch.delenv("KERNCAP_SOCKET", raising=False)
    monkeypatch.setattr(os.path, "exists", lambda p: False)  # no daemon runs
    monkeypatch.setattr(os, "geteuid", lambda: 1234)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1234")
    assert kerncap.default_socket_path() == "/run/user/1234/kerncap/kerncapd.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/dir")  # XDG: ignore relative values
    assert kerncap.default_socket_path() == "/tmp/kerncap-1234/kerncapd.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert kerncap.default_socket_path() == "/tmp/kerncap-1234/kerncapd.sock"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert kerncap.default_socket_path() == "/run/kerncap/kerncapd.sock"
    monkeypatch.setenv("KERNCAP_SOCKET", "/elsewhere/k.sock")
    assert kerncap.default_socket_path() == "/elsewhere/k.sock"
    assert _connection.parse_target(None).unix_path == "/elsewhere/k.sock"


def test_default_socket_finds_the_system_daemon(monkeypatch):
    """A user with no kerncapd of their own reaches the node's system daemon,
    as kerncapctl does; their own daemon and $KERNCAP_SOCKET win."""
    monkeypatch.delenv("KERNCAP_SOCKET", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1234)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1234")
    own = "/run/user/1234/kerncap/kerncapd.sock"
    running = {"/run/kerncap/kerncapd.sock"}
    monkeypatch.setattr(os.path, "exists", lambda p: p in running)
    assert kerncap.default_socket_path() == "/run/kerncap/kerncapd.sock"
    assert "group kerncap" in _connection.socket_access_hint("/run/kerncap/kerncapd.sock")
    running.add(own)
    assert kerncap.default_socket_path() == own
    monkeypatch.setenv("KERNCAP_SOCKET", "/elsewhere/k.sock")
    assert kerncap.default_socket_path() == "/elsewhere/k.sock"


def test_no_daemon_is_unavailable_naming_the_socket(tmp_path):
    sock = str(tmp_path / "none.sock")
    with pytest.raises(kerncap.Unavailable) as e:
        kerncap.connect(sock)
    assert sock in str(e.value)
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, kerncap.KerncapError)
    # Without the early check, the failed call names it too.
    with kerncap.connect(sock, check=False, timeout=5) as c:
        with pytest.raises(kerncap.Unavailable) as e:
            c.status()
    assert f"socket {sock}" in str(e.value)


def test_tls_settings_and_tokens(tmp_path):
    assert _connection.TLS.coerce(None) == kerncap.TLS()
    assert _connection.TLS.coerce(False) is None
    assert _connection.TLS.coerce("ca.pem") == kerncap.TLS(ca="ca.pem")
    assert _connection.TLS.coerce({"ca": "a", "server_name": "n"}).server_name == "n"
    with pytest.raises(kerncap.InvalidArgument):
        _connection.channel_spec("h:1", tls=kerncap.TLS(cert="c.pem"))
    with pytest.raises(kerncap.NotFound):
        _connection.channel_spec("h:1", tls=kerncap.TLS(ca=str(tmp_path / "missing.pem")))
    token = tmp_path / "token"
    token.write_text("  s3cret \nsecond line\n")
    spec = _connection.channel_spec("h:1", token_file=token)
    assert spec.metadata == (("authorization", "Bearer s3cret"),)
    token.write_text("\n")
    with pytest.raises(kerncap.InvalidArgument):
        _connection.channel_spec("h:1", token_file=token)


# ---- request building ----

def test_arm_requests():
    r = _ops.arm_request("matmul", match="regex", pid=42, process="python", device=1, skip=2,
                         nth=3, count=4, ttl="1h30m", tags={"run": "a"})
    s = r.selector
    assert (s.kernel, s.match, s.pid, s.process_name, s.device, s.has_device, s.skip, s.nth,
            s.count) == ("matmul", pb.NAME_REGEX, 42, "python", 1, True, 2, 3, 4)
    assert r.ttl_ms == 5400_000 and dict(r.tags) == {"run": "a"}
    m = _ops.arm_request(mangled="_Z6matmulv")
    assert m.selector.match == pb.NAME_MANGLED and m.selector.kernel == "_Z6matmulv"
    e = _ops.arm_request("k", expires=dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))
    assert e.expires_unix_ms == 4102444800000
    assert _ops.arm_request("k", expires=dt.timedelta(seconds=2)).ttl_ms == 2000
    assert _ops.arm_request("k", ttl=2.5).ttl_ms == 2500
    for kwargs in ({"match": "fuzzy"}, {"count": -1}, {"pid": 1 << 40}, {"ttl": "soon"},
                   {"ttl": 0}, {"device": "0"}, {"mangled": "x", "match": "glob"},
                   {"ttl": 5, "expires": 10**10}):
        with pytest.raises(kerncap.InvalidArgument):
            _ops.arm_request("k", **kwargs)
    with pytest.raises(kerncap.InvalidArgument):
        _ops.arm_request("k", mangled="x")
    assert _ops.disarm_request(None, None).all
    assert _ops.disarm_request("arm-1", None).arm_id == "arm-1"
    with pytest.raises(kerncap.InvalidArgument):
        _ops.disarm_request("arm-1", True)
    assert _ops.tag_filter({"a": "b"}) == "a=b" and _ops.tag_filter(("a", "b")) == "a=b"
    with pytest.raises(kerncap.InvalidArgument):
        _ops.tag_filter("novalue")


# ---- .kcap ----

def _manifest(capture_id="cap-0123456789ab"):
    m = pb.CaptureManifest(format_version=1, capture_id=capture_id, created_unix_ms=1_700_000_000_000)
    m.kernel.demangled_name = "matmul_bf16"
    m.kernel.mangled_name = "_Z11matmul_bf16v"
    m.kernel.platform = pb.PLATFORM_SYNTHETIC
    m.launch.grid.extend([4, 1, 1])
    m.launch.block.extend([128, 1, 1])
    m.argument_blob = struct.pack("<QQi", 0x7F0000000000, 0x7F0100000010, -3)
    m.arguments.add(offset=0, size=8, kind=pb.ARG_POINTER, name="a", type_name="float*")
    m.arguments.add(offset=8, size=8, kind=pb.ARG_POINTER, name="b", type_name="float*")
    m.arguments.add(offset=16, size=4, kind=pb.ARG_BY_VALUE, name="n", type_name="int")
    digests = [bytes([i]) * 32 for i in range(4)]
    r0 = m.pre.regions.add(va=0x7F0000000000, kind=pb.REGION_DEVICE, name="a")
    r0.data.size, r0.data.chunk_size = 3 * 65536, 65536
    r0.data.chunk_digests.extend([digests[0], b"", digests[1]])
    r1 = m.pre.regions.add(va=0x7F0100000000, kind=pb.REGION_MODULE_GLOBAL, name="b")
    r1.data.size, r1.data.chunk_size = 100, 65536
    r1.data.chunk_digests.extend([digests[2]])
    p0 = m.post.regions.add(va=0x7F0000000000, kind=pb.REGION_DEVICE, name="a", diff=True)
    p0.data.size, p0.data.chunk_size = 3 * 65536, 65536
    p0.changed_chunks.extend([2])
    p0.data.chunk_digests.extend([digests[3]])
    p1 = m.post.regions.add(va=0x7F0100000000, kind=pb.REGION_MODULE_GLOBAL, name="b", diff=True)
    p1.data.size, p1.data.chunk_size = 100, 65536
    m.post_complete = True
    m.stats.logical_bytes = 3 * 65536 + 100
    return m, digests


def _write_kcap(path, manifest, digests):
    with kcap.KcapWriter(path) as w:
        w.append(pb.TransferFrame(manifest=manifest, chunks_total=len(digests),
                                  bytes_total=len(digests) * 10))
        for d in digests:
            w.append(pb.TransferFrame(chunk=pb.TransferChunk(digest=d, codec=pb.CODEC_RAW,
                                                             raw_size=10, data=b"x" * 10)))
        w.finish()
    return w


def test_kcap_roundtrip_and_layout(tmp_path):
    m, digests = _manifest()
    path = tmp_path / "a.kcap"
    w = _write_kcap(path, m, digests)
    data = path.read_bytes()
    assert data[:8] == b"\x89KCAP\r\n\x1a" and struct.unpack_from("<II", data, 8) == (1, 0)
    assert data[-8:] == b"KCAP-END" and struct.unpack_from("<IQ", data, len(data) - 20) == (0, 5)
    assert len(data) == w.bytes_written
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["a.kcap"]  # no temp file left
    with kcap.KcapReader(path) as r:
        assert r.manifest.capture_id == m.capture_id and r.chunks_total == 4
        frames = list(r.frames())
    assert len(frames) == 5 and frames[1].chunk.digest == digests[0]
    assert kcap.verify(path) == (4, 40)
    cap = kerncap.Capture.from_kcap(path)
    assert cap.id == "cap-0123456789ab" and cap.kernel.name == "matmul_bf16"


def test_kcap_writer_abort_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with kcap.KcapWriter(tmp_path / "b.kcap") as w:
            w.append(pb.TransferFrame(manifest=pb.CaptureManifest(capture_id="cap-x")))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(kerncap.NotFound):
        kcap.KcapWriter(tmp_path / "no" / "dir.kcap")


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:-1] + b"X", "bad trailer magic"),
    (lambda d: d[:-1], "truncated: trailer needs 16 bytes"),
    (lambda d: d[:-20], "no trailer"),
    (lambda d: d + b"\0", "unexpected bytes after the trailer"),
    (lambda d: d[:40] + bytes([d[40] ^ 0xFF]) + d[41:], "checksum mismatch"),
    (lambda d: b"PK\x03\x04" + d[4:], "bad magic"),
    (lambda d: d[:8], "not a kcap file"),
    (lambda d: d[:-16] + struct.pack("<Q", 9) + d[-8:], "trailer says 9 records"),
])
def test_kcap_damage_is_data_loss(tmp_path, damage, message):
    m, digests = _manifest()
    path = tmp_path / "a.kcap"
    _write_kcap(path, m, digests)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(kerncap.DataLoss) as e:
        kcap.verify(path)
    assert message in str(e.value) and str(path) in str(e.value)
    assert isinstance(e.value, kerncap.KcapFormatError)


def test_kcap_other_version_is_failed_precondition(tmp_path):
    m, digests = _manifest()
    path = tmp_path / "a.kcap"
    _write_kcap(path, m, digests)
    data = bytearray(path.read_bytes())
    data[8] = 2
    path.write_bytes(bytes(data))
    with pytest.raises(kerncap.FailedPrecondition, match="version 2"):
        kcap.KcapReader(path)


# ---- the Capture view ----

def test_capture_view_of_a_manifest():
    m, _ = _manifest()
    cap = kerncap.Capture(m)
    assert cap.launch.grid == [4, 1, 1] and cap.launch.block == [128, 1, 1]
    a, b, n = cap.arguments
    assert (a.kind, a.value, b.value, n.value) == ("pointer", 0x7F0000000000, 0x7F0100000010,
                                                  0xFFFFFFFD)
    assert cap.region_of(b.value).name == "b"
    assert cap.region("a").kind == "device" and cap.region(1).kind == "module_global"
    ra, rb = cap.regions
    assert (ra.chunks, ra.zero_chunks, ra.written, ra.changed_chunks, ra.changed_bytes) == \
        (3, 1, True, [2], 65536)
    assert not rb.written and rb.chunks == 1
    rows = cap.memory_map(as_frame=False)
    assert [r["name"] for r in rows] == ["a", "b"] and rows[0]["va_hex"] == "0x7f0000000000"
    html = cap._repr_html_()
    assert "matmul_bf16" in html and "0x7f0000000000" in html and "background" in html
    assert "region 1 b +0x10" in str(cap)


def test_memory_map_frame_and_plot():
    pd = pytest.importorskip("pandas")
    m, _ = _manifest()
    cap = kerncap.Capture(m)
    frame = cap.memory_map()
    assert isinstance(frame, pd.DataFrame) and list(frame["written"]) == [True, False]
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    ax = cap.plot_memory_map()
    assert "1 written" in ax.get_title()


# ---- kerncap-replay ----

def test_replayer_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNCAP_REPLAY", str(tmp_path / "nope"))
    with pytest.raises(kerncap.ReplayerNotFound, match="KERNCAP_REPLAY"):
        kerncap.find_replayer()
    monkeypatch.delenv("KERNCAP_REPLAY")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(kerncap.ReplayerNotFound, match="on PATH"):
        kerncap.find_replayer()
    fake = write_fake_replayer(str(tmp_path))
    os.rename(fake, tmp_path / "kerncap-replay")
    assert kerncap.find_replayer() == str(tmp_path / "kerncap-replay")


def test_replay_results_from_a_kcap(tmp_path, monkeypatch):
    m, digests = _manifest()
    path = tmp_path / "a.kcap"
    _write_kcap(path, m, digests)
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(str(tmp_path)))
    v = kerncap.validate(path, dtype="f32", rtol=1e-5, region_dtypes={"buf1": "bytes"})
    argv = read_fake_replayer_log(str(tmp_path))["argv"]
    assert argv[:3] == ["validate", str(path), "--json"]
    assert {"--dtype=f32", "--rtol=1e-05", "--region-dtype=buf1:bytes"} <= set(argv)
    assert isinstance(v, kerncap.ValidationResult) and v.passed and v.exit_code == 0
    r0 = v.region_results[0]
    assert (r0.va, r0.dtype, r0.elements_differing, r0.max_rel_error) == \
        (0x7F0000000000, "f32", 2, float("inf"))
    assert "PASS" in str(v) and "buf0" in v._repr_html_()
    b = kerncap.bench(path, iterations=5, warmup=3, cold_l2=True, samples=True)
    argv = read_fake_replayer_log(str(tmp_path))["argv"]
    assert {"--iterations=5", "--warmup=3", "--cold-l2", "--samples"} <= set(argv)
    assert isinstance(b, kerncap.BenchResult) and b.median_ms == 0.042 and b.cold_l2
    assert len(b.samples_ms) == 5 and "median" in b._repr_html_()
    r = kerncap.replay(path, device=1, relocate=False)
    assert isinstance(r, kerncap.ReplayResult) and r.launch_ms == 0.042
    assert {"--device=1", "--no-relocate"} <= set(read_fake_replayer_log(str(tmp_path))["argv"])
    with pytest.raises(kerncap.NotFound):
        kerncap.replay(tmp_path / "missing.kcap")


def test_replay_exit_codes(tmp_path, monkeypatch):
    path = tmp_path / "x.kcap"
    path.write_bytes(b"not read by the fake")
    failing = {"command": "validate", "result": "fail", "regions_compared": 1,
               "regions_failing": 1, "region_results": [{"index": 0, "passed": False,
                                                         "va": "0x10", "name": "out"}]}
    # docs/EXIT_CODES.md: 8 is "validation ran, outputs differ".
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(str(tmp_path), exit_code=8,
                                                             doc=failing))
    v = kerncap.validate(path)
    assert not v.passed and v.exit_code == 8 and v.failing[0].name == "out"
    # Errors are one JSON object on stderr (docs/JSON.md), nothing on stdout.
    no_gpu = {"error": {"code": "failed_precondition", "exit_code": 77,
                        "message": "no CUDA driver: dlopen(libcuda.so.1) failed"}}
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(str(tmp_path), exit_code=77,
                                                             doc="", stderr=json.dumps(no_gpu)))
    with pytest.raises(kerncap.NoDevice, match="no CUDA driver") as e:
        kerncap.replay(path)
    assert e.value.exit_code == 77
    broken = {"error": {"code": "internal", "exit_code": 1, "message": "cuModuleLoadData failed"}}
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(str(tmp_path), exit_code=1,
                                                             doc="", stderr=json.dumps(broken)))
    with pytest.raises(kerncap.ReplayError, match="cuModuleLoadData"):
        kerncap.bench(path)
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(
        str(tmp_path), exit_code=2, doc={}, stderr="--iterations: Value 0 not in range"))
    with pytest.raises(kerncap.InvalidArgument, match="iterations"):
        kerncap.bench(path, iterations=0)


def test_real_replayer_without_gpu_reports_no_device(tmp_path, monkeypatch):
    from conftest import binary
    real = binary("kerncap-replay")
    if real is None:
        pytest.skip("kerncap-replay not built")
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd"):
        pytest.skip("a GPU is present: the no-device path is not what runs here")
    m, digests = _manifest()
    path = tmp_path / "a.kcap"
    _write_kcap(path, m, digests)
    monkeypatch.setenv("KERNCAP_REPLAY", real)
    with pytest.raises(kerncap.ReplayError) as e:
        kerncap.validate(path)
    # No CUDA driver here: exit 77 (NoDevice). A driver without a GPU, or a
    # damaged capture, is a replay error with the replayer's message.
    assert e.value.exit_code in (1, 77) and e.value.message


# ---- progress ----

def test_progress_callback_and_fallbacks(capsys):
    from kerncap import _progress
    seen = []
    bar = _progress.make(lambda done, total: seen.append((done, total)), "x", 10)
    bar.update(4)
    bar.update(10)
    bar.close()
    assert seen == [(4, 10), (10, 10)]
    assert isinstance(_progress.make(False, "x", 10), _progress._Null)
    text = _progress._Text("export", 2048, True)
    text.update(1024)
    text.close()
    assert "export: 1.00 KiB / 2.00 KiB" in capsys.readouterr().err  # kerncapctl's text


def test_memory_map_without_pandas_is_a_list(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    m, _ = _manifest()
    rows = kerncap.Capture(m).memory_map()
    assert isinstance(rows, list) and rows[0]["written"] is True
    with pytest.raises(ImportError):
        kerncap.Capture(m).memory_map(as_frame=True)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="matplotlib"):
        kerncap.Capture(m).plot_memory_map()
