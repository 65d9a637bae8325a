"""The API's vocabulary: the one table of enum names, the address fields and
the exit codes, as kerncapctl, kerncap-replay and kerncapd use them
(common/control/api_names.cc, common/exit_codes.h, docs/JSON.md,
docs/EXIT_CODES.md).

tests/test_vocabulary.py checks this copy against `kerncapctl help json -o
json`, so the Python client cannot spell a region kind differently from the
CLI.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Union, cast

if TYPE_CHECKING:  # (tools/gen_message_stubs.py loads this file on its own)
    from google._upb._message import FieldDescriptor as _UpbField
    from google.protobuf.message import Message

    from ._types import JSONObject, JSONValue
    from google.protobuf.descriptor import FieldDescriptor as _PyField

    _Field = Union[_PyField, _UpbField]  # the pure-Python or the upb runtime's

ENUM_NAMES: Dict[str, Dict[str, str]] = {
    "kerncap.v1.ArgumentKind": {
        "ARGUMENT_KIND_UNSPECIFIED": "unspecified",
        "ARG_BY_VALUE": "value",
        "ARG_HIDDEN": "hidden",
        "ARG_POINTER": "pointer",
    },
    "kerncap.v1.ArmState": {
        "ARM_ACTIVE": "active",
        "ARM_DISARMED": "disarmed",
        "ARM_DONE": "done",
        "ARM_EXPIRED": "expired",
        "ARM_STATE_UNSPECIFIED": "unspecified",
    },
    "kerncap.v1.CaptureSource": {
        "CAPTURE_SOURCE_UNSPECIFIED": "unspecified",
        "SOURCE_AGENT": "agent",
        "SOURCE_IMPORT": "import",
        "SOURCE_REFERENCE_IMPORT": "reference_import",
    },
    "kerncap.v1.ChunkCodec": {
        "CODEC_RAW": "raw",
        "CODEC_UNSPECIFIED": "unspecified",
        "CODEC_ZSTD": "zstd",
    },
    "kerncap.v1.CodeObjectFormat": {
        "CODE_OBJECT_CUBIN": "cubin",
        "CODE_OBJECT_FATBIN": "fatbin",
        "CODE_OBJECT_FORMAT_UNSPECIFIED": "unspecified",
        "CODE_OBJECT_HSACO": "hsaco",
        "CODE_OBJECT_PTX": "ptx",
    },
    "kerncap.v1.NameMatch": {
        "NAME_GLOB": "glob",
        "NAME_MANGLED": "mangled",
        "NAME_MATCH_UNSPECIFIED": "substring",
        "NAME_REGEX": "regex",
        "NAME_SUBSTRING": "substring",
    },
    "kerncap.v1.PerShape": {
        "PER_SHAPE_LAUNCH": "launch",
        "PER_SHAPE_OFF": "off",
        "PER_SHAPE_SCALARS": "scalars",
    },
    "kerncap.v1.Platform": {
        "PLATFORM_CUDA": "cuda",
        "PLATFORM_HSA": "hsa",
        "PLATFORM_SYNTHETIC": "synthetic",
        "PLATFORM_UNSPECIFIED": "unspecified",
    },
    "kerncap.v1.RegionKind": {
        "REGION_CONSTANT": "constant",
        "REGION_DEVICE": "device",
        "REGION_DEVICE_VMM": "device_vmm",
        "REGION_HOST_PINNED": "host_pinned",
        "REGION_KERNARG": "kernarg",
        "REGION_KIND_UNSPECIFIED": "unspecified",
        "REGION_MANAGED": "managed",
        "REGION_MODULE_GLOBAL": "module_global",
    },
    "kerncap.v1.ReproducerKind": {
        "REPRODUCER_BINARY": "binary",
        "REPRODUCER_CUDA": "cuda",
        "REPRODUCER_HIP": "hip",
        "REPRODUCER_KIND_UNSPECIFIED": "auto",
        "REPRODUCER_TRITON": "triton",
    },
    "kerncap.v1.SubstitutionState": {
        "SUBSTITUTION_ACTIVE": "active",
        "SUBSTITUTION_ENDED": "ended",
        "SUBSTITUTION_STATE_UNSPECIFIED": "unspecified",
    },
    "kerncap.v1.TextureObject.Type": {
        "SURFACE_OBJECT": "surface",
        "TEXTURE_OBJECT": "texture",
        "TEXTURE_OBJECT_TYPE_UNSPECIFIED": "unspecified",
    },
    "kerncap.v1.TextureResource.Type": {
        "RESOURCE_ARRAY": "array",
        "RESOURCE_LINEAR": "linear",
        "RESOURCE_MIPMAPPED_ARRAY": "mipmapped_array",
        "RESOURCE_PITCH2D": "pitch2d",
        "RESOURCE_TYPE_UNSPECIFIED": "unspecified",
    },
}
ADDRESS_FIELDS = (
    "kerncap.v1.Region.va",
    "kerncap.v1.LaunchConfig.stream",
    "kerncap.v1.GraphOrigin.graph_exec",
    "kerncap.v1.GraphOrigin.graph",
    "kerncap.v1.GraphOrigin.node",
    "kerncap.v1.TextureObject.handle",
    "kerncap.v1.TextureResource.device_ptr",
    "kerncap.v1.TextureResource.array_handle",
)
EXIT_CODES: Dict[str, int] = {
    "ok": 0,
    "error": 1,
    "usage": 2,
    "not_found": 3,
    "unavailable": 4,
    "data_loss": 5,
    "permission": 6,
    "conflict": 7,
    "mismatch": 8,
    "refused": 9,
    "no_device": 77,
}


def enum_name(enum_type: str, value_name: str) -> Optional[str]:
    """"device_vmm" for ("kerncap.v1.RegionKind", "REGION_DEVICE_VMM")."""
    return ENUM_NAMES.get(enum_type, {}).get(value_name)


def is_address_field(full_name: str) -> bool:
    """True for a uint64 field that holds an address or handle
    ("kerncap.v1.Region.va"): JSON writes it as a "0x..." string."""
    return full_name in ADDRESS_FIELDS


def message_to_json(message: Message) -> JSONObject:
    """An API message as kerncapctl -o json prints it (common/control/api_json.h):
    proto field names, every scalar field present, unset message fields and
    unchosen oneof members left out, integers as numbers, address fields as
    "0x..." strings, bytes as lowercase hex, enums as their short names."""
    out: JSONObject = {}
    for f in message.DESCRIPTOR.fields:
        is_map = (f.message_type is not None and f.message_type.GetOptions().map_entry)
        repeated = _is_repeated(f)
        if f.message_type is not None and not repeated:
            if not message.HasField(f.name):
                continue
        elif f.containing_oneof is not None and not repeated:
            if message.WhichOneof(f.containing_oneof.name) != f.name:
                continue
        value = getattr(message, f.name)
        if is_map and f.message_type is not None:
            value_field = f.message_type.fields_by_name["value"]
            out[f.name] = {str(k): _scalar(value_field, v) for k, v in value.items()}
        elif repeated:
            out[f.name] = [_scalar(f, v) for v in value]
        else:
            out[f.name] = _scalar(f, value)
    return out


def _is_repeated(f: _Field) -> bool:
    # protobuf >= 6 has is_repeated (and no label); older releases only label.
    flag = getattr(f, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(getattr(f, "label") == f.LABEL_REPEATED)


def _scalar(f: _Field, v: object) -> JSONValue:
    # v is the field's Python value; the descriptor says which type it has (a
    # message, an enum number, bytes, an integer, a float, a bool or a str).
    if f.message_type is not None:
        return message_to_json(cast("Message", v))
    if f.enum_type is not None:
        number = cast(int, v)
        value = f.enum_type.values_by_number.get(number)
        name = enum_name(f.enum_type.full_name, value.name) if value is not None else None
        return name if name is not None else number
    if f.type == f.TYPE_BYTES:
        return bytes(cast(bytes, v)).hex()
    if is_address_field(f.full_name):
        return f"0x{cast(int, v):x}"
    if isinstance(v, float):
        return json_float(v)
    return cast(Union[bool, int, str], v)


def json_float(v: float) -> Union[float, str]:
    """JSON has no infinities or NaN: they are the strings "inf", "-inf", "nan"."""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v
