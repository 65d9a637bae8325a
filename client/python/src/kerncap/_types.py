"""Type aliases and protocols shared by the client's modules (typing only:
nothing here changes what a function accepts at run time).

The protocol's own types (message classes, their JSON TypedDicts, the type of
kerncap.pb) are in _messages.pyi, generated from the .proto files.
"""
from __future__ import annotations

import datetime as _dt
import os
from typing import Callable, Dict, List, Literal, Mapping, Protocol, Sequence, Tuple, Union

# A path argument: a str or a path object (pathlib.Path, os.DirEntry, ...).
PathLike = Union[str, "os.PathLike[str]"]

# A JSON document as json.loads returns it and json.dumps takes it.
JSONValue = Union[None, bool, int, float, str, List["JSONValue"], Dict[str, "JSONValue"]]
JSONObject = Dict[str, JSONValue]
# A JSON number that may be infinite or NaN: those are the strings (docs/JSON.md).
JSONFloat = Union[float, Literal["inf", "-inf", "nan"]]

# Seconds (int/float), a timedelta, or text like "30s", "5m", "1h30m", "250ms".
Duration = Union[int, float, str, _dt.timedelta]
# A point in time: a datetime (naive = local time) or unix seconds.
Instant = Union[_dt.datetime, int, float]
# arm(expires=...): an absolute time, or a timedelta from now.
Expiry = Union[Instant, _dt.timedelta]

# The enumerated string options.
MatchKind = Literal["substring", "glob", "regex", "mangled"]
PerShapeMode = Literal["scalars", "launch"]
ReproKind = Literal["auto", "cuda", "hip", "triton", "binary"]
CodeObjectKind = Literal["cubin", "fatbin", "ptx"]

# captures(tag=...): "k=v", (k, v) or {k: v}.
TagFilter = Union[str, Tuple[str, str], Mapping[str, str]]
# validate(region_dtypes=...): {region (address, index or name): dtype}, or
# "REGION:DTYPE" texts.
RegionDtypes = Union[Mapping[Union[int, str], str], Sequence[str]]

# progress=: None (a tqdm bar when tqdm is installed), True, False, or a
# callable called as progress(done, total) (its result is ignored).
ProgressCallback = Callable[[int, int], object]
ProgressArg = Union[None, bool, ProgressCallback]

# A gRPC channel option ("grpc.max_receive_message_length", 1 << 27).
ChannelOption = Tuple[str, Union[int, str]]


class HasCaptureId(Protocol):
    """What names a capture besides its id: CaptureSummary, Capture,
    ExportResult, ImportResult, ReproResult."""

    @property
    def capture_id(self) -> str: ...


class HasArmId(Protocol):
    """An Arm (what Client.arm returns)."""

    @property
    def arm_id(self) -> str: ...


# A capture: its id (or a unique prefix), or an object that carries it.
CaptureRef = Union[str, HasCaptureId]
# An arm: its id, or the Arm.
ArmRef = Union[str, HasArmId]
# What replay()/validate()/bench() take: a capture, or a .kcap file's path.
ReplaySource = Union[CaptureRef, "os.PathLike[str]"]
