"""Compiles proto/kerncap/v1/*.proto into a FileDescriptorSet.

Used by setup.py at build time and, for a source checkout that was never
built (editable installs, PYTHONPATH=src), by kerncap._pb at import time.
Standard library only: setup.py loads this file before any dependency is
importable.

Why a descriptor set and not protoc's generated *_pb2.py: generated Python
code is tied to the protobuf runtime it was generated for (code from a
current protoc refuses to load on Debian 12's protobuf 3.21/4.21, and code
from an old protoc is not guaranteed to load on protobuf 6+). A serialized
FileDescriptorSet is a stable wire format every runtime reads, and
kerncap._pb turns it into message classes with the runtime's own
message_factory.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

DESCRIPTOR_FILE = "kerncap_v1.binpb"


def proto_files(proto_root: Path) -> List[str]:
    files = sorted(p.relative_to(proto_root).as_posix()
                   for p in (proto_root / "kerncap" / "v1").glob("*.proto"))
    if not files:
        raise FileNotFoundError(f"no kerncap/v1/*.proto under {proto_root}")
    return files


def _run_grpc_tools(args: List[str]) -> Optional[str]:
    """Runs grpc_tools' bundled protoc; None when grpc_tools is missing."""
    import importlib.util
    if importlib.util.find_spec("grpc_tools") is None:
        return None
    # protoc.main prints its diagnostics itself; a separate process keeps
    # them (and any crash) out of the build's own process.
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from grpc_tools import protoc; "
                           "sys.exit(protoc.main(['protoc'] + sys.argv[1:]))", *args],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"grpc_tools.protoc failed ({proc.returncode}): {proc.stderr.strip()}")
    return "grpc_tools.protoc"


def compile_descriptor_set(proto_root: Path, out_path: Path) -> str:
    """Writes the FileDescriptorSet (with imports) to out_path; returns the
    protoc used. Order: $PROTOC, grpc_tools.protoc, `protoc` on PATH."""
    proto_root = Path(proto_root).resolve()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kerncap-desc-", dir=str(out_path.parent))
    os.close(fd)
    args = ["-I", str(proto_root), "--include_imports",
            f"--descriptor_set_out={tmp}", *proto_files(proto_root)]
    try:
        used = None
        explicit = os.environ.get("PROTOC")
        if explicit:
            subprocess.run([explicit, *args], check=True, capture_output=True, text=True)
            used = explicit
        if used is None:
            used = _run_grpc_tools(args)
        if used is None:
            system = shutil.which("protoc")
            if system is None:
                raise RuntimeError(
                    "cannot compile kerncap's .proto files: no protoc found. Install "
                    "grpcio-tools (pip) or protobuf-compiler (apt), or set PROTOC=/path/to/protoc")
            subprocess.run([system, *args], check=True, capture_output=True, text=True)
            used = system
        os.replace(tmp, out_path)
        return used
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"protoc failed ({e.returncode}): {e.stderr.strip()}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def find_repo_proto_root(start: Path) -> Optional[Path]:
    """The repository's proto/ folder above `start`, or None."""
    for parent in [start, *start.parents]:
        candidate = parent / "proto"
        if (candidate / "kerncap" / "v1" / "control.proto").is_file():
            return candidate
    return None
