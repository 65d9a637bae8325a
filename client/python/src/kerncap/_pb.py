"""The kerncap.v1 protobuf classes, built at import time.

The build (setup.py) compiles proto/kerncap/v1/*.proto into a
FileDescriptorSet; this module loads it into a private DescriptorPool and
asks the installed protobuf runtime for the message classes, so the same
package works with Debian 12's protobuf (3.21 C++ / 4.21 Python) and with
current PyPI releases (upb, protobuf 5-7). Exposed as `kerncap.pb`:

    kerncap.pb.ArmRequest(selector=kerncap.pb.Selector(kernel="matmul"))
    kerncap.pb.NameMatch.Name(2)  -> "NAME_GLOB";  kerncap.pb.NAME_GLOB -> 2
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Dict, NamedTuple, Type, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal import enum_type_wrapper
from google.protobuf.message import Message

from . import _protoc

if TYPE_CHECKING:
    from ._messages import Namespace

PACKAGE = "kerncap.v1"
SERVICE = "kerncap.v1.KerncapControl"


def _descriptor_bytes() -> bytes:
    packaged = Path(__file__).resolve().parent / "_generated" / _protoc.DESCRIPTOR_FILE
    if packaged.is_file():
        return packaged.read_bytes()
    # A source checkout that was never built: compile now, from
    # $KERNCAP_PROTO_DIR or the repository's proto/ folder.
    root = os.environ.get("KERNCAP_PROTO_DIR")
    proto_root = Path(root) if root else _protoc.find_repo_proto_root(Path(__file__).resolve())
    if proto_root is None:
        raise ImportError(
            "kerncap: the compiled protocol descriptors are missing and no proto/ folder was "
            "found; install the package with pip (which compiles them) or set "
            "KERNCAP_PROTO_DIR to the repository's proto/ folder")
    with tempfile.TemporaryDirectory(prefix="kerncap-proto-") as tmp:
        out = Path(tmp) / _protoc.DESCRIPTOR_FILE
        _protoc.compile_descriptor_set(proto_root, out)
        return out.read_bytes()


class Method(NamedTuple):
    name: str
    path: str  # "/kerncap.v1.KerncapControl/GetStatus"
    request: Type[Message]
    response: Type[Message]
    client_streaming: bool
    server_streaming: bool


class _Namespace:
    """Attribute access to the message classes, enum wrappers and enum values."""

    def __init__(self) -> None:
        self.descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(_descriptor_bytes())
        self.pool = descriptor_pool.DescriptorPool()
        for f in self.descriptor_set.file:  # protoc emits dependencies first
            self.pool.AddSerializedFile(f.SerializeToString())
        self._classes: Dict[str, Type[Message]] = {}
        self.methods: Dict[str, Method] = {}
        for f in self.descriptor_set.file:
            if f.package != PACKAGE:
                continue
            for m in f.message_type:
                setattr(self, m.name, self._message_class(f"{PACKAGE}.{m.name}"))
            for e in f.enum_type:
                wrapper = enum_type_wrapper.EnumTypeWrapper(
                    self.pool.FindEnumTypeByName(f"{PACKAGE}.{e.name}"))
                setattr(self, e.name, wrapper)
                for v in e.value:
                    setattr(self, v.name, v.number)
            for s in f.service:
                for rpc in s.method:
                    self.methods[rpc.name] = Method(
                        name=rpc.name,
                        path=f"/{f.package}.{s.name}/{rpc.name}",
                        request=self._message_class(rpc.input_type.lstrip(".")),
                        response=self._message_class(rpc.output_type.lstrip(".")),
                        client_streaming=rpc.client_streaming,
                        server_streaming=rpc.server_streaming)

    def _message_class(self, full_name: str) -> Type[Message]:
        cls = self._classes.get(full_name)
        if cls is None:
            desc = self.pool.FindMessageTypeByName(full_name)
            get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
            if get is not None:
                cls = cast("Type[Message]", get(desc))
            else:  # protobuf 3.20-4.21 (Debian 12); current stubs no longer list it
                factory = message_factory.MessageFactory(self.pool)
                cls = factory.GetPrototype(desc)  # type: ignore[attr-defined,unused-ignore]
            self._classes[full_name] = cls
        return cls

    def has_field(self, message_name: str, field: str) -> bool:
        """Whether this build's protocol knows `field` (for fields added later)."""
        desc = self.pool.FindMessageTypeByName(f"{PACKAGE}.{message_name}")
        return field in desc.fields_by_name


# The classes are made at run time; _messages.pyi (generated from the same
# .proto files) is what a type checker sees of them.
pb = cast("Namespace", _Namespace())
