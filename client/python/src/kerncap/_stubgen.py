"""Writes kerncap/_messages.pyi: the static types of kerncap.pb.

kerncap.pb builds its message classes at import time from the compiled
descriptor set (see _pb.py for why), so a type checker cannot see them. This
stub, generated from the same descriptor set by the build (setup.py, next to
kerncap_v1.binpb), declares

  * one class per message (fields with their Python types, the keyword-only
    constructor, HasField/WhichOneof with the names they accept),
  * one TypedDict per message, NAME + "JSON": what kerncap.message_to_json()
    returns for it under docs/JSON.md (integers as numbers, addresses as
    "0x..." strings, bytes as lowercase hex, enums as their short names or,
    for a value this build does not know, the number; unset message fields and
    unchosen oneof members left out),
  * Namespace: the type of kerncap.pb itself.

It is a stub only (there is no _messages.py): import it under
`typing.TYPE_CHECKING`. Like the descriptor set it is never committed. In a
source checkout, to run mypy by hand:

    python src/kerncap/_stubgen.py      # writes src/kerncap/_messages.pyi

Needs protobuf (descriptor_pb2) and, loaded by path, _vocab.py and _protoc.py
(setup.py loads this file before the package is importable).
"""
from __future__ import annotations

import importlib.util
import keyword
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Mapping, Sequence, Tuple

from google.protobuf import descriptor_pb2 as d

PACKAGE_DIR = Path(__file__).resolve().parent
STUB_FILE = "_messages.pyi"
PACKAGE = "kerncap.v1"

# FieldDescriptorProto.Type numbers (descriptor.proto).
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING = range(1, 10)
_GROUP, _MESSAGE, _BYTES, _UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = range(10, 19)
_REPEATED = 3
_PY_SCALAR = {_DOUBLE: "float", _FLOAT: "float", _BOOL: "bool", _STRING: "str",
              _BYTES: "bytes"}


def _load(name: str) -> ModuleType:
    """A sibling module by path (_vocab and _protoc need nothing else)."""
    spec = importlib.util.spec_from_file_location(f"_kerncap_{name}", PACKAGE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Message:
    """A message descriptor (proto) with its dotted Python name."""

    def __init__(self, proto: d.DescriptorProto, py_name: str, full_name: str) -> None:
        self.proto = proto
        self.py_name = py_name      # "TextureObject" or "Outer.Inner"
        self.full_name = full_name  # "kerncap.v1.TextureObject"


class _Generator:
    def __init__(self, descriptor_set: d.FileDescriptorSet, enum_names: Mapping[str, Mapping[str, str]],
                 address_fields: Sequence[str]) -> None:
        self.enum_names = enum_names
        self.address_fields = set(address_fields)
        self.messages: Dict[str, _Message] = {}    # ".kerncap.v1.X" -> message
        self.map_entries: Dict[str, d.DescriptorProto] = {}   # ".kerncap.v1.X.TagsEntry" -> proto
        self.enums: Dict[str, str] = {}            # ".kerncap.v1.X" -> py name
        self.top_messages: List[d.DescriptorProto] = []
        self.top_enums: List[d.EnumDescriptorProto] = []
        for f in descriptor_set.file:
            if f.package != PACKAGE:
                continue
            for m in f.message_type:
                self.top_messages.append(m)
                self._index(m, m.name, f"{PACKAGE}.{m.name}")
            for e in f.enum_type:
                self.top_enums.append(e)
                self.enums[f".{PACKAGE}.{e.name}"] = e.name

    def _index(self, m: d.DescriptorProto, py_name: str, full_name: str) -> None:
        if m.options.map_entry:
            self.map_entries["." + full_name] = m
            return
        self.messages["." + full_name] = _Message(m, py_name, full_name)
        for n in m.nested_type:
            self._index(n, f"{py_name}.{n.name}", f"{full_name}.{n.name}")
        for e in m.enum_type:
            self.enums[f".{full_name}.{e.name}"] = f"{py_name}.{e.name}"

    # ---- types ----

    def _is_map(self, f: d.FieldDescriptorProto) -> bool:
        return f.type == _MESSAGE and f.type_name in self.map_entries

    def _map_kv(self, f: d.FieldDescriptorProto) -> Tuple[d.FieldDescriptorProto, d.FieldDescriptorProto]:
        entry = self.map_entries[f.type_name]
        fields = {x.name: x for x in entry.field}
        return fields["key"], fields["value"]

    def _py_scalar(self, f: d.FieldDescriptorProto) -> str:
        t = f.type
        if t == _MESSAGE:
            return self.messages[f.type_name].py_name
        return _PY_SCALAR.get(t, "int")  # integers and enums

    def _enum_alias(self, type_name: str) -> str:
        return self.enums[type_name].replace(".", "") + "Name"

    def _json_scalar(self, f: d.FieldDescriptorProto, owner_full: str) -> str:
        t = f.type
        if t == _MESSAGE:
            return self.messages[f.type_name].py_name.replace(".", "") + "JSON"
        if t == _ENUM:
            return f"Union[{self._enum_alias(f.type_name)}, int]"
        if t in (_DOUBLE, _FLOAT):
            return "JSONFloat"
        if t in (_BYTES, _STRING):
            return "str"
        if t == _BOOL:
            return "bool"
        if f"{owner_full}.{f.name}" in self.address_fields:
            return "str"
        return "int"

    # ---- output ----

    def generate(self) -> str:
        out: List[str] = [
            "# Generated by kerncap/_stubgen.py from proto/kerncap/v1/*.proto (at build time,",
            "# like _generated/kerncap_v1.binpb): do not edit.",
            '"""Static types of kerncap.pb (a stub only: import it under typing.TYPE_CHECKING).',
            "",
            "Message classes as kerncap.pb builds them at run time, NAME + \"JSON\" TypedDicts",
            "for what kerncap.message_to_json() returns (docs/JSON.md), and Namespace, the",
            'type of kerncap.pb."""',
            "from typing import Dict, Iterable, List, Literal, Mapping, Optional, Type, Union",
            "",
            "from google.protobuf.descriptor_pb2 import FileDescriptorSet",
            "from google.protobuf.descriptor_pool import DescriptorPool",
            "from google.protobuf.internal.containers import (",
            "    RepeatedCompositeFieldContainer, RepeatedScalarFieldContainer, ScalarMap)",
            "from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper",
            "from google.protobuf.message import Message",
            "from typing_extensions import NotRequired, TypedDict",
            "",
            "from ._pb import Method",
            "from ._types import JSONFloat as JSONFloat",
            "",
            "# Enum names (docs/JSON.md; kerncap._vocab.ENUM_NAMES).",
        ]
        for type_name in sorted(self.enums, key=lambda n: self.enums[n]):
            full = type_name.lstrip(".")
            names = sorted(set(self.enum_names.get(full, {}).values()))
            literal = ", ".join(f'"{n}"' for n in names)
            out.append(f"{self._enum_alias(type_name)} = Literal[{literal}]"
                       if names else f"{self._enum_alias(type_name)} = str")
        out.append("")
        for m in self.top_messages:
            if not m.options.map_entry:
                out += self._message_class(m, m.name, f"{PACKAGE}.{m.name}", "")
        for msg in self.messages.values():
            out += self._json_dict(msg)
        out += self._namespace()
        return "\n".join(out) + "\n"

    def _fields(self, m: d.DescriptorProto) -> List[d.FieldDescriptorProto]:
        return [f for f in m.field if not keyword.iskeyword(f.name)]

    def _message_class(self, m: d.DescriptorProto, py_name: str, full_name: str, indent: str) -> List[str]:
        i2 = indent + "    "
        out = [f"{indent}class {m.name}(Message):"]
        body: List[str] = []
        for e in m.enum_type:
            body.append(f"{i2}{e.name}: EnumTypeWrapper")
            body += [f"{i2}{v.name}: int" for v in e.value]
        for n in m.nested_type:
            if not n.options.map_entry:
                body += self._message_class(n, f"{py_name}.{n.name}", f"{full_name}.{n.name}",
                                            i2)
        init: List[str] = []
        has: List[str] = []
        oneofs: Dict[int, List[str]] = {}
        for f in self._fields(m):
            name = f.name
            repeated = f.label == _REPEATED
            if f.HasField("oneof_index") and not f.proto3_optional:
                oneofs.setdefault(f.oneof_index, []).append(name)
                has.append(name)
            if self._is_map(f):
                k, v = self._map_kv(f)
                kt, vt = self._py_scalar(k), self._py_scalar(v)
                body += [f"{i2}@property", f"{i2}def {name}(self) -> ScalarMap[{kt}, {vt}]: ..."]
                init.append(f"{name}: Optional[Mapping[{kt}, {vt}]] = ...")
            elif repeated:
                t = self._py_scalar(f)
                container = ("RepeatedCompositeFieldContainer" if f.type == _MESSAGE
                             else "RepeatedScalarFieldContainer")
                body += [f"{i2}@property", f"{i2}def {name}(self) -> {container}[{t}]: ..."]
                init.append(f"{name}: Optional[Iterable[{t}]] = ...")
            elif f.type == _MESSAGE:
                t = self._py_scalar(f)
                body += [f"{i2}@property", f"{i2}def {name}(self) -> {t}: ..."]
                init.append(f"{name}: Optional[{t}] = ...")
                if name not in has:
                    has.append(name)
            else:
                t = self._py_scalar(f)
                body.append(f"{i2}{name}: {t}")
                init.append(f"{name}: Optional[{t}] = ...")
        if init:
            body.append(f"{i2}def __init__(")
            body.append(f"{i2}    self,")
            body.append(f"{i2}    *,")
            body += [f"{i2}    {a}," for a in init]
            body.append(f"{i2}) -> None: ...")
        if has:
            names = ", ".join(f'"{n}"' for n in has)
            body.append(f"{i2}def HasField(self, field_name: Literal[{names}]) -> bool: ...")
        if oneofs:
            groups = ", ".join(f'"{m.oneof_decl[i].name}"' for i in sorted(oneofs))
            members = ", ".join(f'"{n}"' for i in sorted(oneofs) for n in oneofs[i])
            body.append(f"{i2}def WhichOneof(self, oneof_group: Literal[{groups}]) -> "
                        f"Optional[Literal[{members}]]: ...")
        return out + (body or [f"{i2}..."]) + ([""] if not indent else [])

    def _json_dict(self, msg: _Message) -> List[str]:
        m = msg.proto
        out = [f"class {msg.py_name.replace('.', '')}JSON(TypedDict):"]
        body: List[str] = []
        for f in self._fields(m):
            name = f.name
            repeated = f.label == _REPEATED
            if self._is_map(f):
                _, v = self._map_kv(f)
                t = f"Dict[str, {self._json_scalar(v, '')}]"
            elif repeated:
                t = f"List[{self._json_scalar(f, msg.full_name)}]"
            else:
                t = self._json_scalar(f, msg.full_name)
                in_oneof = f.HasField("oneof_index") and not f.proto3_optional
                if f.type == _MESSAGE or in_oneof:
                    t = f"NotRequired[{t}]"
            body.append(f"    {name}: {t}")
        return out + (body or ["    ..."]) + [""]

    def _namespace(self) -> List[str]:
        out = ["# Aliases: Namespace's attributes have the classes' own names."]
        tops = [m.name for m in self.top_messages if not m.options.map_entry]
        out += [f"_{n} = {n}" for n in tops]
        out += ["", "class Namespace:",
                '    """The type of kerncap.pb: the message classes, the enum wrappers and the',
                '    enum values of kerncap.v1, and the service\'s methods."""',
                "    descriptor_set: FileDescriptorSet",
                "    pool: DescriptorPool",
                "    methods: Dict[str, Method]",
                "    def has_field(self, message_name: str, field: str) -> bool: ..."]
        out += [f"    {n}: Type[_{n}]" for n in tops]
        for e in self.top_enums:
            out.append(f"    {e.name}: EnumTypeWrapper")
            out += [f"    {v.name}: int" for v in e.value]
        return out


def generate(descriptor_set: d.FileDescriptorSet, enum_names: Mapping[str, Mapping[str, str]],
             address_fields: Sequence[str]) -> str:
    """The stub's text for a FileDescriptorSet of kerncap/v1/*.proto."""
    return _Generator(descriptor_set, enum_names, address_fields).generate()


def stub_text(descriptor_set: bytes) -> str:
    """The stub for a serialized FileDescriptorSet (kerncap_v1.binpb), with
    the enum names and address fields of _vocab.py."""
    vocab = _load("_vocab")
    return generate(d.FileDescriptorSet.FromString(descriptor_set), vocab.ENUM_NAMES,
                    vocab.ADDRESS_FIELDS)


def write_stub(descriptor_set: bytes, out: Path) -> None:
    """Writes the stub (setup.py: next to the compiled descriptor set)."""
    Path(out).write_text(stub_text(descriptor_set))


def main(argv: Sequence[str]) -> int:
    """A source checkout: compiles the repository's proto/ and writes
    src/kerncap/_messages.pyi (gitignored)."""
    protoc = _load("_protoc")
    root = protoc.find_repo_proto_root(PACKAGE_DIR)
    if root is None:
        print(f"_stubgen: no proto/ folder above {PACKAGE_DIR}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        compiled = Path(tmp) / "set.binpb"
        protoc.compile_descriptor_set(root, compiled)
        write_stub(compiled.read_bytes(), PACKAGE_DIR / STUB_FILE)
    print(f"wrote {PACKAGE_DIR / STUB_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
