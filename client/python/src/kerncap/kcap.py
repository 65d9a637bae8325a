"""The `.kcap` file: one capture exported from a kerncapd store.

Same byte format as kerncapctl (format/kcap_file.h), so files move
freely between `kerncapctl export/import` and this package. All integers are
little-endian:

    file    := header record+ trailer
    header  := magic[8] version:u32 reserved:u32
               magic = 89 'K' 'C' 'A' 'P' 0D 0A 1A, version = 1, reserved = 0
    record  := length:u32 checksum:u64 payload[length]
               1 <= length <= 256 MiB; payload = one serialized
               kerncap.v1.TransferFrame; checksum = XXH3-64 of payload
    trailer := 00 00 00 00 record_count:u64 "KCAP-END"

The first record carries the manifest (with chunks_total and bytes_total),
every other record one chunk as stored (zstd or raw). Writers write a temp
file next to the target and rename it into place only after the trailer is
written and fsynced, so a partial file never carries the target's name.
"""
from __future__ import annotations

import os
import struct
import tempfile
from typing import TYPE_CHECKING, BinaryIO, Iterator, Optional, Tuple, Union

import xxhash
from google.protobuf.message import Message

from . import errors
from ._pb import pb
from ._types import PathLike

if TYPE_CHECKING:
    from ._messages import CaptureManifest, TransferFrame

MAGIC = b"\x89KCAP\r\n\x1a"
END_MAGIC = b"KCAP-END"
VERSION = 1
HEADER_BYTES = 16
RECORD_HEADER_BYTES = 12
TRAILER_BYTES = 20
MAX_RECORD_BYTES = 256 << 20


def checksum(payload: bytes) -> int:
    return xxhash.xxh3_64_intdigest(payload)


class KcapWriter:
    """Writes a .kcap file; nothing appears at `path` until finish().

        with KcapWriter(path) as w:      # an exception discards the temp file
            w.append(frame_or_bytes)
            ...
            w.finish()
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        base = os.path.basename(self.path)
        try:
            fd, self.tmp_path = tempfile.mkstemp(prefix=f".{base}.tmp-", dir=directory)
        except FileNotFoundError:
            raise errors.NotFound(f"cannot create {self.path}: no such directory "
                                  f"{directory}") from None
        except PermissionError:
            raise errors.PermissionDenied(f"cannot create a file in {directory}") from None
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would surprise whoever shares the file
        self._file: Optional[BinaryIO] = os.fdopen(fd, "wb")
        self.records = 0
        self.bytes_written = 0
        self.finished = False
        self._write(MAGIC + struct.pack("<II", VERSION, 0))

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        self._file.write(data)
        self.bytes_written += len(data)

    def append(self, frame: Union[bytes, bytearray, memoryview, Message]) -> None:
        """Appends one record: a serialized TransferFrame (written as given,
        so frames relayed from the daemon keep their exact bytes) or a
        TransferFrame message."""
        if self.finished or self._file is None:
            raise errors.FailedPrecondition("kcap writer already finished")
        payload = bytes(frame) if isinstance(frame, (bytes, bytearray, memoryview)) \
            else frame.SerializeToString()
        if not 1 <= len(payload) <= MAX_RECORD_BYTES:
            raise errors.InvalidArgument(
                f"transfer frame of {len(payload)} bytes cannot be a kcap record")
        self._write(struct.pack("<IQ", len(payload), checksum(payload)))
        self._write(payload)
        self.records += 1

    def finish(self) -> None:
        if self.finished or self._file is None:
            raise errors.FailedPrecondition("kcap writer already finished")
        if self.records == 0:
            raise errors.FailedPrecondition("a kcap file needs a manifest record")
        self._write(struct.pack("<IQ", 0, self.records) + END_MAGIC)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        os.replace(self.tmp_path, self.path)
        self.finished = True
        # The rename is durable only once the directory is synced.
        dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if not self.finished and os.path.exists(self.tmp_path):
            os.unlink(self.tmp_path)

    def __enter__(self) -> "KcapWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.finished:
            self.abort()


class KcapReader:
    """Reads a .kcap file record by record, checking what kerncapctl checks:
    magic and version, every record's length and XXH3, the trailer's record
    count, nothing after the trailer, a manifest first and chunks after.
    Every problem raises KcapFormatError (a DataLoss) naming the file and
    the byte offset.

        with KcapReader(path) as r:
            manifest = r.manifest          # parsed first record
            for payload in r.payloads():   # raw records, first one included
                ...
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        try:
            self._file: BinaryIO = open(self.path, "rb")
        except FileNotFoundError:
            raise errors.NotFound(f"no such file: {self.path}") from None
        except IsADirectoryError:
            raise errors.InvalidArgument(f"{self.path} is not a regular file") from None
        except PermissionError:
            raise errors.PermissionDenied(f"cannot read {self.path}: permission denied") from None
        try:
            self._open()
        except BaseException:
            self._file.close()
            raise

    def _open(self) -> None:
        self.size = os.fstat(self._file.fileno()).st_size
        self.offset = 0
        self.records = 0
        self._done = False
        self._first: Optional[bytes] = None
        if self.size < HEADER_BYTES:
            raise self._corrupt(f"only {self.size} bytes, not a kcap file")
        header = self._read(HEADER_BYTES, "header")
        if header[:8] != MAGIC:
            raise self._corrupt("bad magic: not a kcap file")
        version = struct.unpack_from("<I", header, 8)[0]
        if version != VERSION:
            raise errors.FailedPrecondition(
                f"{self.path}: kcap format version {version}; this client reads version {VERSION}")
        # The manifest is read eagerly: every use needs it, and a file whose
        # first record is bad should fail at open.
        first = self._next_payload()
        if first is None:
            raise self._corrupt("no manifest record")
        frame = pb.TransferFrame.FromString(first)
        if not frame.HasField("manifest"):
            raise self._corrupt("the first record does not carry a manifest")
        self._first = first
        self.manifest_frame = frame

    # ---- low level ----

    def _corrupt(self, what: str) -> errors.KcapFormatError:
        return errors.KcapFormatError(
            f"{self.path}: {what} (at byte {self.offset} of {self.size})")

    def _read(self, n: int, what: str) -> bytes:
        if n > self.size - min(self.offset, self.size):
            raise self._corrupt(f"truncated: {what} needs {n} bytes, the file ends "
                                f"{self.size - self.offset} bytes later")
        data = self._file.read(n)
        if len(data) != n:
            raise self._corrupt(f"truncated while reading {what}")
        self.offset += n
        return data

    def _next_payload(self) -> Optional[bytes]:
        if self._done:
            return None
        if self.offset == self.size:
            raise self._corrupt(f"truncated after {self.records} records: no trailer")
        (length,) = struct.unpack("<I", self._read(4, "record length"))
        if length == 0:
            rest = self._read(TRAILER_BYTES - 4, "trailer")
            if rest[8:] != END_MAGIC:
                raise self._corrupt("bad trailer magic")
            (count,) = struct.unpack_from("<Q", rest, 0)
            if count != self.records:
                raise self._corrupt(f"trailer says {count} records, the file has {self.records}")
            if self.records == 0:
                raise self._corrupt("no manifest record")
            if self.offset != self.size:
                raise self._corrupt(f"{self.size - self.offset} unexpected bytes after the trailer")
            self._done = True
            return None
        if length > MAX_RECORD_BYTES:
            raise self._corrupt(f"record {self.records + 1} claims {length} bytes")
        (expected,) = struct.unpack("<Q", self._read(8, "record checksum"))
        payload = self._read(length, "record payload")
        if checksum(payload) != expected:
            raise self._corrupt(f"record {self.records + 1} checksum mismatch")
        self.records += 1
        return payload

    # ---- public ----

    @property
    def manifest(self) -> CaptureManifest:
        return self.manifest_frame.manifest

    @property
    def chunks_total(self) -> int:
        return self.manifest_frame.chunks_total

    @property
    def bytes_total(self) -> int:
        return self.manifest_frame.bytes_total

    def payloads(self) -> Iterator[bytes]:
        """Every record's payload (manifest first), verified, then the trailer
        is checked. Each chunk record is checked to parse as a chunk frame."""
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        while True:
            payload = self._next_payload()
            if payload is None:
                return
            frame = pb.TransferFrame.FromString(payload)
            if not frame.HasField("chunk"):
                raise self._corrupt(f"record {self.records} does not carry a chunk")
            yield payload

    def frames(self) -> Iterator[TransferFrame]:
        for payload in self.payloads():
            yield pb.TransferFrame.FromString(payload)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "KcapReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_manifest(path: PathLike) -> CaptureManifest:
    """The CaptureManifest of a .kcap file (only its first record is read)."""
    with KcapReader(path) as r:
        return r.manifest


def verify(path: PathLike) -> Tuple[int, int]:
    """Reads the whole file and checks every record; returns (chunks, raw
    bytes of the chunks)."""
    chunks = raw = 0
    with KcapReader(path) as r:
        for frame in r.frames():
            if frame.HasField("chunk"):
                chunks += 1
                raw += frame.chunk.raw_size
    return chunks, raw
