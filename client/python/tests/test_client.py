"""Every Client call against a real kerncapd, with the synthetic agent
producing captures."""
from __future__ import annotations

import datetime as dt
import filecmp
import os
import threading
import time

import pytest

import kerncap
from conftest import read_fake_replayer_log, write_fake_replayer

pb = kerncap.pb


def test_status(client, daemon):
    st = client.status()
    assert st.unix_socket == daemon.socket and st.agent_socket == daemon.agent_socket
    assert st.store.path == daemon.store and st.store.chunk_size == 64 << 10
    assert st.pid == daemon.proc.pid and st.version
    assert isinstance(st.started, dt.datetime)
    assert "kerncapd status" in st._repr_html_() and daemon.store in str(st)


def test_agents_listed_while_connected(client, daemon):
    # The agent waits for an arm first; while it waits it is connected.
    proc = daemon.start_agent(kernels="agentprobe", dispatches=1, wait_arm_ms=8000)
    try:
        deadline = time.monotonic() + 10
        mine = []
        while not mine and time.monotonic() < deadline:
            mine = [a for a in client.agents() if a.pid == proc.pid]
            time.sleep(0.05)
        assert mine, "the synthetic agent never showed up in ListAgents"
        a = mine[0]
        assert a.platform == "synthetic" and a.devices[0].name == "Synthetic Device"
        assert a.process.process_name == "synthetic_agent"
        assert "synthetic_agent" in client.agents()._repr_html_()
    finally:
        proc.kill()
        proc.wait()


def test_agents_wait_shows_an_application_right_after_it_starts(client, daemon):
    """The notebook's `c.agents()` right after starting the application: the
    agent connects a moment after its process starts, so a plain listing can
    miss it; wait= waits for it."""
    proc = daemon.start_agent(kernels="waitprobe", dispatches=1, wait_arm_ms=8000)
    try:
        started = time.monotonic()
        agents = client.agents(pid=proc.pid, wait=20)
        assert [a.pid for a in agents] == [proc.pid], "wait= returned before the agent came"
        assert time.monotonic() - started < 15
        assert all(a.pid == proc.pid for a in client.agents(pid=proc.pid))
        assert len(client.agents(wait="5s")) >= 1  # any agent: returns as soon as one is there
    finally:
        proc.kill()
        proc.wait()
    # Nothing connects: it returns what there is (nothing) once wait is over.
    started = time.monotonic()
    assert client.agents(pid=1, wait=0.5) == []
    assert 0.45 <= time.monotonic() - started < 5
    with pytest.raises(kerncap.InvalidArgument, match="wait"):
        client.agents(wait="soon")


def test_kernel_census_lists_the_agents_kernels(client, daemon):
    proc = daemon.start_agent(kernels="census_a,census_b", dispatches=1, wait_arm_ms=8000)
    try:
        deadline = time.monotonic() + 10
        mine = []
        while not mine and time.monotonic() < deadline:
            mine = [k for k in client.kernels(pid=proc.pid)]
            time.sleep(0.05)
        assert [k.name for k in mine] == ["census_a", "census_b"]
        assert all(k.pid == proc.pid and k.process_name == "synthetic_agent" for k in mine)
        assert mine[0].mangled_name == "_Z8census_av"
        assert mine[0].to_dict()["module"] == "synthetic-module-0"
        listing = client.kernels(process="synthetic_agent")
        assert "census_b" in listing._repr_html_() and "census_b" in str(listing)
        assert client.kernels(pid=1) == [] and client.kernels(pid=1).notes == []
    finally:
        proc.kill()
        proc.wait()


def test_kernel_sample_counts_launches_and_shapes(client, daemon):
    # The agent launches its 6 dispatches only while a sample runs: dispatch
    # i is kernels[i % 2] with grid (i % 3) + 1.
    proc = daemon.start_agent(kernels="hot_a,hot_b", dispatches=6, shapes=3, wait_arm_ms=0,
                              mutate=False, wait_sample_ms=20000)
    try:
        deadline = time.monotonic() + 10
        while not client.kernels(pid=proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        listing = client.kernels(pid=proc.pid, sample="1s")
        assert listing.sampled and listing.notes == []
        assert [(k.name, k.launches) for k in listing] == [("hot_a", 3), ("hot_b", 3)]
        a = listing[0]
        # hot_a: dispatches 0, 2, 4 -> grids 1, 3, 2: three configurations.
        assert sorted(c.grid[0] for c in a.launch_configs) == [1, 2, 3]
        assert all(c.launches == 1 and c.block == (128, 1, 1) for c in a.launch_configs)
        assert a.argument_shapes == 3 and not a.argument_shapes_capped
        assert "launches" in str(listing)
        assert a.to_dict()["launch_configs"][0]["launches"] == 1
        # Without a sample nothing is counted.
        assert all(k.launches is None for k in client.kernels(pid=proc.pid))
        with pytest.raises(kerncap.InvalidArgument, match="60000 ms"):
            client.kernels(sample="2m")
        with pytest.raises(kerncap.InvalidArgument, match="bad duration"):
            client.kernels(sample="soon")
        # kerncapd bounds it too (a client that does not check).
        with pytest.raises(kerncap.InvalidArgument, match="sample_ms: 70000"):
            client._unary("ListKernels", pb.ListKernelsRequest(sample_ms=70000),
                          pb.ListKernelsResponse)
    finally:
        proc.kill()
        proc.wait()


def test_arm_mirrors_the_selector_and_disarm(client):
    arm = client.arm("attn.*fwd", match="regex", pid=4242, process="python", device=1, skip=2,
                     count=4, ttl="10m", tags={"run": "baseline"})
    s = arm.selector
    assert (s.kernel, s.match, s.pid, s.process_name, s.device, s.skip, s.nth, s.count) == \
        ("attn.*fwd", "regex", 4242, "python", 1, 2, 0, 4)
    nth = client.arm("attn", nth=3)
    assert (nth.selector.nth, nth.selector.skip) == (3, 0)
    assert arm.state == "active" and arm.tags == {"run": "baseline"}
    assert arm.expires is not None and arm.expires > arm.created + dt.timedelta(minutes=9)
    mangled = client.arm(mangled="_Z6kernelv", expires=time.time() + 600)
    assert mangled.selector.match == "mangled"
    assert {arm.arm_id, mangled.arm_id} <= {a.arm_id for a in client.arms()}
    assert [a.arm_id for a in client.disarm(arm)] == [arm.arm_id]
    gone = {a.arm_id: a for a in client.arms(all=True)}[arm.arm_id]
    assert gone.state == "disarmed"
    assert arm.arm_id not in {a.arm_id for a in client.arms()}
    assert mangled.arm_id in {a.arm_id for a in client.disarm()}  # no id: every active arm
    assert nth.arm_id in {a.arm_id for a in client.arms(all=True) if a.state == "disarmed"}
    assert "arm-" in client.arms(all=True)._repr_html_()


def test_per_shape_arm_takes_one_capture_per_launch_shape(client, daemon):
    arm = client.arm("shapeprobe", per_shape=True, count=5, ttl="5m")
    s = arm.selector
    assert (s.per_shape, s.count) == ("scalars", 5) and "per-shape=scalars" in str(s)
    lines = daemon.run_agent(kernels="shapeprobe", dispatches=12, shapes=3, mutate=False)
    shapes = [line["launch_shape"] for line in lines if "capture_id" in line]
    assert len(shapes) == 3 and len(set(shapes)) == 3, lines
    assert [line["dispatch"] for line in lines] == [0, 1, 2]
    got = {a.arm_id: a for a in client.arms(all=True)}[arm.arm_id]
    assert got.captured == 3 and got.state == "active"
    launch = client.arm("shapeprobe_other", per_shape="launch")
    assert (launch.selector.per_shape, launch.selector.count) == ("launch", 16)
    assert launch.to_dict()["selector"]["per_shape"] == "launch"
    with pytest.raises(kerncap.InvalidArgument, match="per_shape"):
        client.arm("k", per_shape="sometimes")
    with pytest.raises(kerncap.InvalidArgument, match="nth"):
        client.arm("k", per_shape=True, nth=2)
    client.disarm(arm)
    client.disarm(launch)


def test_bad_selectors_are_invalid_argument(client):
    with pytest.raises(kerncap.InvalidArgument, match="selector.kernel"):
        client.arm("", match="regex")       # the daemon's check
    with pytest.raises(kerncap.InvalidArgument, match="selector.device"):
        client.arm("k", device=-1)
    with pytest.raises(kerncap.InvalidArgument, match="skip and nth"):
        client.arm("k", skip=2, nth=3)     # contradictory: both pick the dispatch
    with pytest.raises(kerncap.InvalidArgument, match="ttl_ms"):
        client.arm("k", ttl=400 * 86400)
    with pytest.raises(kerncap.InvalidArgument, match="bad match"):
        client.arm("k", match="fuzzy")     # checked before sending
    with pytest.raises(ValueError):        # InvalidArgument is a ValueError too
        client.arm("k", count=-1)
    with pytest.raises(kerncap.InvalidArgument):
        client.captures(tag="novalue")


def test_captures_and_capture_detail(client, captured):
    ids = captured["ids"]
    listed = client.captures(kernel="matmul", tag="suite=python")
    assert set(ids) <= set(listed.ids)
    assert client.captures(tag={"suite": "python"}, limit=1).ids[0] in ids
    assert client.captures(kernel="no-such-kernel") == []
    s = {c.capture_id: c for c in listed}[ids[0]]
    assert s.kernel == "matmul_bf16" and s.platform == "synthetic" and s.source == "agent"
    assert s.regions == 2 and s.tags == {"suite": "python"}
    assert client.captures(pid=s.pid).ids and client.captures(pid=1).ids == []
    html = listed._repr_html_()
    assert ids[0] in html and "matmul_bf16" in html

    cap = client.capture(ids[0][:10])  # unique prefix
    assert cap.id == ids[0] and cap.kernel.name == "matmul_bf16"
    assert cap.kernel.mangled_name == "_Z11matmul_bf16v" and cap.arm_id == captured["arm"].arm_id
    assert cap.launch.block == [128, 1, 1] and cap.post_complete
    assert [a.name for a in cap.arguments] == ["buf0", "buf1"]
    assert all(a.kind == "pointer" for a in cap.arguments)
    assert [cap.region_of(a.value).name for a in cap.arguments] == ["buf0", "buf1"]
    sizes = [r.size for r in cap.regions]
    assert sizes == [1 << 20, 1 << 18]
    assert cap.regions[0].chunks == 16 and cap.regions[1].chunks == 4
    # --mutate: an in-place kernel; a quarter of the 64 KiB blocks change.
    assert cap.written_regions and all(r.changed_chunks for r in cap.written_regions)
    assert cap.code_objects[0].name == "matmul_bf16.cubin"
    assert cap.stats.logical_bytes > 0 and cap.exclusive_raw_bytes is not None
    rows = cap.memory_map(as_frame=False)
    assert [r["va"] for r in rows] == sorted(r.va for r in cap.regions)
    assert any(r["written"] for r in rows)
    html = cap._repr_html_()
    assert cap.id in html and "memory map" in html and "buf0" in html


def test_memory_map_is_a_dataframe_with_pandas(client, captured):
    pd = pytest.importorskip("pandas")
    frame = client.capture(captured["ids"][0]).memory_map()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["name"]) == ["buf0", "buf1"] and frame["written"].any()


def test_plot_memory_map(client, captured):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    ax = client.capture(captured["ids"][0]).plot_memory_map()
    assert "matmul_bf16" in ax.get_title() and len(ax.patches) >= 2


def test_unknown_capture_is_not_found(client):
    for call in (client.capture, client.delete, lambda i: client.export(i, "/tmp/never.kcap")):
        with pytest.raises(kerncap.NotFound) as e:
            call("cap-000000000000")
        assert isinstance(e.value, LookupError) and e.value.code == "NOT_FOUND"
    assert not os.path.exists("/tmp/never.kcap")
    with pytest.raises(kerncap.InvalidArgument):
        client.capture("../etc/passwd")


def test_wait_for_capture_with_events_and_polling(client, daemon):
    arm = client.arm(kernel="softmax_wait")
    t = threading.Timer(0.3, daemon.run_agent,
                        kwargs=dict(kernels="softmax_wait", region_mib="0.25"))
    t.start()
    cap = client.wait_for_capture(arm, timeout=30)
    t.join()
    assert cap.kernel.name == "softmax_wait" and cap.arm_id == arm.arm_id
    # The arm already has it: no waiting.
    assert client.wait_for_capture(arm.arm_id, timeout=5).id == cap.id
    # Kernel only, polling instead of WatchEvents.
    client.arm(kernel="gemm_poll")
    t = threading.Timer(0.3, daemon.run_agent, kwargs=dict(kernels="gemm_poll", region_mib="0.25"))
    t.start()
    polled = client.wait_for_capture(kernel="gemm_poll", timeout=30, use_events=False,
                                     poll_interval=0.1)
    t.join()
    assert polled.kernel.name == "gemm_poll"
    # `since` finds one that is already there.
    assert client.wait_for_capture(kernel="gemm_poll", since=time.time() - 60,
                                   timeout=5).id == polled.id


def test_wait_for_capture_timeout_and_arm_end(client):
    t0 = time.monotonic()
    with pytest.raises(kerncap.Timeout, match="no capture within"):
        client.wait_for_capture(kernel="never_dispatched", timeout=1)
    assert time.monotonic() - t0 < 10
    arm = client.arm(kernel="never_dispatched")
    threading.Timer(0.3, client.disarm, args=(arm,)).start()
    with pytest.raises(kerncap.CaptureFailed, match="DISARMED") as e:
        client.wait_for_capture(arm, timeout=10)
    assert e.value.arm_id == arm.arm_id
    with pytest.raises(kerncap.NotFound):
        client.wait_for_capture("arm-doesnotexist", timeout=2)


def test_watch_events(client, daemon):
    events = []

    def collect():
        for e in client.watch(timeout=3):
            events.append(e)

    t = threading.Thread(target=collect)
    t.start()
    time.sleep(0.5)
    arm = client.arm(kernel="watched_kernel")
    daemon.run_agent(kernels="watched_kernel", region_mib="0.25")
    t.join()
    kinds = [e.kind for e in events]
    assert "arm_changed" in kinds and "capture_committed" in kinds
    committed = [e.data for e in events if e.kind == "capture_committed"]
    assert committed[0].kernel == "watched_kernel"
    assert any(e.kind == "arm_changed" and e.data.arm_id == arm.arm_id for e in events)


def test_export_is_byte_identical_to_kerncapctl(client, daemon, captured, tmpdir_short):
    cid = captured["ids"][0]
    ours = f"{tmpdir_short}/py.kcap"
    theirs = f"{tmpdir_short}/ctl.kcap"
    seen = []
    result = client.export(cid, ours, progress=lambda done, total: seen.append((done, total)))
    daemon.ctl("export", cid, "--out", theirs, check=True)
    assert filecmp.cmp(ours, theirs, shallow=False), "python and kerncapctl .kcap files differ"
    assert result.capture_id == cid and result.file_bytes == os.path.getsize(ours)
    assert seen and seen[-1][0] == seen[-1][1] == result.raw_bytes
    chunks, raw = kerncap.kcap.verify(theirs)
    assert (chunks, raw) == (result.chunks, result.raw_bytes)
    assert kerncap.Capture.from_kcap(theirs).id == cid


def test_kcap_moves_both_ways_between_python_and_kerncapctl(client, daemon, tmpdir_short):
    client.arm(kernel="transfer_kernel")
    cid = daemon.run_agent(kernels="transfer_kernel", region_mib="0.5")[0]["capture_id"]
    before = client.capture(cid)
    py_file, ctl_file = f"{tmpdir_short}/py.kcap", f"{tmpdir_short}/ctl.kcap"
    client.export(cid, py_file, progress=False)
    daemon.ctl("export", cid, "--out", ctl_file, check=True)
    # Python writes, kerncapctl imports.
    assert client.delete(cid) == cid
    with pytest.raises(kerncap.NotFound):
        client.capture(cid)
    r = daemon.ctl("--json", "import", py_file, check=True)
    assert cid in r.stdout
    assert client.capture(cid).stats.logical_bytes == before.stats.logical_bytes
    # kerncapctl writes, Python imports.
    client.delete(cid)
    imported = client.import_kcap(ctl_file, progress=False)
    assert imported.capture_id == cid
    after = client.capture(cid)
    assert after.source == "import"
    assert [r.size for r in after.regions] == [r.size for r in before.regions]
    assert [r.changed_chunks for r in after.regions] == [r.changed_chunks for r in before.regions]
    # Importing what is already there.
    with pytest.raises(kerncap.AlreadyExists):
        client.import_kcap(py_file, progress=False)
    assert client.verify(cid).ok


def test_import_of_a_damaged_kcap_commits_nothing(client, daemon, tmpdir_short):
    client.arm(kernel="damaged_kernel")
    cid = daemon.run_agent(kernels="damaged_kernel", region_mib="0.5")[0]["capture_id"]
    path = f"{tmpdir_short}/d.kcap"
    client.export(cid, path, progress=False)
    client.delete(cid)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # inside a chunk record
    open(path, "wb").write(bytes(data))
    with pytest.raises(kerncap.DataLoss, match="nothing was imported"):
        client.import_kcap(path, progress=False)
    with pytest.raises(kerncap.NotFound):
        client.capture(cid)
    with pytest.raises(kerncap.NotFound):
        client.import_kcap(f"{tmpdir_short}/missing.kcap")


def test_delete_gc_verify(client, daemon):
    client.arm(kernel="deleted_kernel")
    cid = daemon.run_agent(kernels="deleted_kernel", region_mib="0.5", seed=99)[0]["capture_id"]
    report = client.verify(cid, rehash=True, progress=False)
    assert report.ok and report.chunks_checked > 0
    assert client.delete(cid) == cid
    gc = client.gc(dry_run=True)
    assert gc.dry_run
    assert client.gc().dead_chunks >= 0
    assert cid not in client.captures().ids


def test_repro_unimplemented_or_written(client, captured, tmpdir_short):
    out = f"{tmpdir_short}/repro"
    try:
        result = client.repro(captured["ids"][0], out)
    except kerncap.Unimplemented as e:
        assert "cannot generate this reproducer" in str(e)
        assert not os.path.exists(out)  # nothing half-written
        return
    # kerncapd generates reproducers: the files land under `out`, whole.
    assert result.files and all(os.path.exists(os.path.join(out, f)) for f in result.files)
    if "capture.kcap" in result.files:  # the capture, as the daemon's own .kcap writer made it
        assert kerncap.Capture.from_kcap(os.path.join(out, "capture.kcap")).id == \
            captured["ids"][0]
        assert kerncap.kcap.verify(os.path.join(out, "capture.kcap"))[0] > 0
    if result.project is not None:
        assert result.project["provenance"]["capture_id"] == captured["ids"][0]
    with pytest.raises(kerncap.AlreadyExists):
        client.repro(captured["ids"][0], out)
    on_host = client.repro(captured["ids"][0], f"{tmpdir_short}/on-daemon", on_daemon=True)
    assert on_host.on_daemon and os.path.isdir(on_host.path)


def test_replay_by_id_goes_through_the_socket(client, daemon, captured, tmpdir_short,
                                             monkeypatch):
    monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(tmpdir_short))
    cap = client.capture(captured["ids"][0])
    v = client.validate(cap, dtype="bf16", atol=0.01)
    log = read_fake_replayer_log(tmpdir_short)
    assert log["argv"][:3] == ["validate", f"--daemon=unix:{daemon.socket}", cap.id]
    assert "--dtype=bf16" in log["argv"] and "--atol=0.01" in log["argv"]
    assert v.passed
    b = client.bench(cap.id, iterations=5)
    assert b.iterations == 5 and "--iterations=5" in read_fake_replayer_log(tmpdir_short)["argv"]
    r = client.replay(cap)
    assert r.command == "run"
    # A .kcap path is given to the replayer as is.
    path = f"{tmpdir_short}/r.kcap"
    client.export(cap, path, progress=False)
    client.replay(path)
    assert read_fake_replayer_log(tmpdir_short)["argv"][:2] == ["run", path]
