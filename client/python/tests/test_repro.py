"""repro(): GenerateReproducer's file stream written to a local folder.

The stream is served here by a small in-process gRPC server that speaks
kerncap.v1 like the daemon does (so every frame shape can be tested): files as (path, content, mode) frames, large files in several frames
(with an `offset` when the protocol has that field), and the final
`written_to` frame when the daemon writes the project itself."""
from __future__ import annotations

import os
import stat
from concurrent import futures

import grpc
import pytest

import kerncap
from conftest import short_tmpdir

pb = kerncap.pb
SERVICE = "kerncap.v1.KerncapControl"


class FakeDaemon:
    def __init__(self, frames=None, error=None):
        self.frames = frames or []
        self.error = error
        self.requests = []
        self.dir = short_tmpdir("kcpyrepro-")
        self.socket = f"{self.dir}/fake.sock"
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        m = pb.methods["GenerateReproducer"]
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            "GenerateReproducer": grpc.unary_stream_rpc_method_handler(
                self._generate, request_deserializer=m.request.FromString,
                response_serializer=m.response.SerializeToString)})
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(f"unix:{self.socket}")
        self.server.start()

    def _generate(self, request, context):
        self.requests.append(request)
        for f in self.frames:
            yield f
        if self.error:
            context.abort(*self.error)

    def close(self):
        self.server.stop(0)


@pytest.fixture()
def fake():
    daemons = []

    def make(**kw):
        d = FakeDaemon(**kw)
        daemons.append(d)
        return d

    yield make
    for d in daemons:
        d.close()


def frame(path, content=b"", mode=0, offset=None, written_to="", total_size=None,
          project_json=None):
    f = pb.ReproducerFile(path=path, content=content, mode=mode, written_to=written_to)
    if offset is not None and pb.has_field("ReproducerFile", "offset"):
        f.offset = offset
    if total_size is not None and pb.has_field("ReproducerFile", "total_size"):
        f.total_size = total_size
    if project_json is not None and pb.has_field("ReproducerFile", "project_json"):
        f.project_json = project_json
    return f


needs_offsets = pytest.mark.skipif(
    not pb.has_field("ReproducerFile", "total_size"),
    reason="this build's control.proto has no ReproducerFile.offset/total_size")


def test_files_modes_and_multi_frame_files(fake, tmpdir_short):
    big_a, big_b = b"a" * 1000, b"b" * 500
    d = fake(frames=[
        frame("Makefile", b"all:\n", 0o644),
        frame("src/kernel.cu", b"__global__ void k() {}\n", 0o644),
        frame("run.sh", b"#!/bin/sh\n", 0o755),
        frame("data/blob.bin", big_a, 0o644, offset=0, total_size=1500),
        frame("data/blob.bin", big_b, 0, offset=len(big_a), total_size=1500),
        frame("build/", b"", 0o40755),
    ])
    out = f"{tmpdir_short}/proj"
    with kerncap.connect(d.socket) as c:
        result = c.repro("cap-0123456789ab", out, kind="cuda", source_dir="/src/app")
    req = d.requests[0]
    assert (req.capture_id, req.kind, req.source_dir, req.out_dir) == \
        ("cap-0123456789ab", pb.REPRODUCER_CUDA, "/src/app", "")
    assert result.files == ["Makefile", "src/kernel.cu", "run.sh", "data/blob.bin"]
    assert result.path == out and not result.on_daemon
    assert open(f"{out}/src/kernel.cu", "rb").read() == b"__global__ void k() {}\n"
    assert open(f"{out}/data/blob.bin", "rb").read() == big_a + big_b
    assert stat.S_IMODE(os.stat(f"{out}/run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(f"{out}/Makefile").st_mode) == 0o644
    assert os.path.isdir(f"{out}/build")
    assert sorted(os.listdir(tmpdir_short)) == ["proj"]  # no temp folder left
    # An existing, non-empty folder is not overwritten unless asked.
    with kerncap.connect(d.socket) as c:
        with pytest.raises(kerncap.AlreadyExists):
            c.repro("cap-0123456789ab", out)
        c.repro("cap-0123456789ab", out, overwrite=True)


@needs_offsets
def test_offsets_total_size_and_project_summary(fake, tmpdir_short):
    d = fake(frames=[
        frame("big.bin", b"B" * 10, 0o644, offset=10, total_size=20),  # out of order
        frame("big.bin", b"A" * 10, 0, offset=0, total_size=20),
        frame("", project_json='{"kind": "cuda", "kernel": "matmul_bf16"}'),
    ])
    with kerncap.connect(d.socket) as c:
        r = c.repro("cap-0123456789ab", f"{tmpdir_short}/p", compile_commands="/src/cc.json")
    assert d.requests[0].compile_commands == "/src/cc.json"
    assert open(f"{tmpdir_short}/p/big.bin", "rb").read() == b"A" * 10 + b"B" * 10
    assert r.project == {"kind": "cuda", "kernel": "matmul_bf16"}
    # A file that did not arrive whole is refused, and nothing is left.
    d = fake(frames=[frame("big.bin", b"A" * 10, 0o644, offset=0, total_size=20)])
    with kerncap.connect(d.socket) as c:
        with pytest.raises(kerncap.DataLoss, match="incomplete: 10 of 20 bytes"):
            c.repro("cap-0123456789ab", f"{tmpdir_short}/q")
    assert os.listdir(tmpdir_short) == ["p"]


def test_unsafe_paths_are_refused(fake, tmpdir_short):
    for bad in ("../escape.txt", "/etc/passwd", "a/../../b"):
        d = fake(frames=[frame("ok.txt", b"x"), frame(bad, b"evil")])
        with kerncap.connect(d.socket) as c:
            with pytest.raises(kerncap.DataLoss, match="unsafe path"):
                c.repro("cap-0123456789ab", f"{tmpdir_short}/p")
    assert os.listdir(tmpdir_short) == []
    assert not os.path.exists(os.path.join(os.path.dirname(tmpdir_short), "escape.txt"))


def test_on_daemon_returns_the_daemon_path(fake, tmpdir_short):
    d = fake(frames=[frame("", written_to="/srv/repro/matmul")])
    with kerncap.connect(d.socket) as c:
        r = c.repro("cap-0123456789ab", "/srv/repro/matmul", on_daemon=True, overwrite=True)
    assert d.requests[0].out_dir == "/srv/repro/matmul"
    if pb.has_field("GenerateReproducerRequest", "force"):
        assert d.requests[0].force
    assert r.on_daemon and r.path == "/srv/repro/matmul"


def test_errors_mid_stream_leave_nothing(fake, tmpdir_short):
    d = fake(frames=[frame("a.txt", b"a")],
             error=(grpc.StatusCode.DATA_LOSS, "chunk abc: checksum mismatch"))
    with kerncap.connect(d.socket) as c:
        with pytest.raises(kerncap.DataLoss, match="checksum mismatch"):
            c.repro("cap-0123456789ab", f"{tmpdir_short}/p")
    assert os.listdir(tmpdir_short) == []
    d = fake(error=(grpc.StatusCode.UNIMPLEMENTED,
                    "this reproducer kind is not implemented"))
    with kerncap.connect(d.socket) as c:
        with pytest.raises(kerncap.Unimplemented, match="cannot generate this reproducer"):
            c.repro("cap-0123456789ab", f"{tmpdir_short}/p")
    d = fake(error=(grpc.StatusCode.NOT_FOUND, "capture cap-0123456789ab not found"))
    with kerncap.connect(d.socket) as c:
        with pytest.raises(kerncap.NotFound):
            c.repro("cap-0123456789ab", f"{tmpdir_short}/p")


def test_async_repro(fake, tmpdir_short):
    import asyncio
    import kerncap.aio
    d = fake(frames=[frame("README.md", b"# repro\n", 0o644)])

    async def main():
        async with kerncap.aio.connect(d.socket) as c:
            return await c.repro("cap-0123456789ab", f"{tmpdir_short}/p")

    r = asyncio.run(main())
    assert r.files == ["README.md"]
    assert open(f"{tmpdir_short}/p/README.md").read() == "# repro\n"
