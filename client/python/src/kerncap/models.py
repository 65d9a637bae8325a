"""Plain-Python views of kerncapd's answers.

Each dataclass mirrors one protobuf message with Python types (datetimes in
UTC, enum values as short lowercase names the way kerncapctl prints them, ints
for addresses and sizes) and keeps the original message in `.raw` for
anything not surfaced here. Lists have a `_repr_html_` so notebooks show them
as tables, and `to_dataframe()` when pandas is installed.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import Field, dataclass, field, fields
from typing import (TYPE_CHECKING, Dict, Generic, Iterable, List, Optional, Sequence, Tuple,
                    TypedDict, TypeVar, Union, cast)

from google.protobuf.message import Message as ProtoMessage

from . import _format as fmt
from ._pb import pb
from ._types import JSONObject, JSONValue
from ._vocab import ENUM_NAMES, json_float, message_to_json

if TYPE_CHECKING:
    import pandas as pd
    from _typeshed import DataclassInstance

    from . import _messages as msg


def _names(enum: str) -> Dict[int, str]:
    """Enum value -> its short name from the one table (_vocab.py)."""
    wrapper = getattr(pb, enum)
    return {wrapper.Value(n): short for n, short in ENUM_NAMES["kerncap.v1." + enum].items()}


# Enum value -> the name kerncapctl prints and every JSON document uses.
PLATFORMS = _names("Platform")
MATCHES = _names("NameMatch")
# Parsing: "substring" is NAME_SUBSTRING (0, unspecified, also reads as substring).
MATCH_VALUES = {short: v for v, short in sorted(MATCHES.items()) if v != 0}
ARM_STATES = _names("ArmState")
PER_SHAPES = _names("PerShape")
REGION_KINDS = _names("RegionKind")
SOURCES = _names("CaptureSource")
ARG_KINDS = _names("ArgumentKind")
CODE_FORMATS = _names("CodeObjectFormat")
REPRODUCER_KINDS = {short: v for v, short in _names("ReproducerKind").items()}


def _name(table: Dict[int, str], value: int) -> Optional[str]:
    return table.get(value)


def _is_time(f: Field[object]) -> bool:
    return "datetime" in str(f.type)


def json_value(v: object) -> JSONValue:
    """A value under the JSON policy (docs/JSON.md): bytes as lowercase hex,
    nested dataclasses through their to_dict, containers element-wise."""
    if isinstance(v, JsonMixin):
        return v.to_dict()
    if hasattr(v, "DESCRIPTOR") and hasattr(v, "ListFields"):  # a protobuf message
        return message_to_json(cast(ProtoMessage, v))
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, float):
        return json_float(v)
    if isinstance(v, _dt.datetime):
        return int(round(v.timestamp() * 1000))
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return cast(JSONValue, v)  # None, bool, int, str (any other value is left as it is)


class JsonMixin:
    """to_dict() under the JSON policy kerncapctl -o json follows: field
    names as in the API, integers as numbers, addresses (the class's
    `_addresses`) as "0x..." strings, datetime fields as NAME_unix_ms integer
    milliseconds (0 when unset), enums as their short names. json.dumps takes
    the result as is. Also a default HTML rendering (key/value table)."""

    _addresses: Tuple[str, ...] = ()

    def to_dict(self) -> JSONObject:
        out: JSONObject = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name.startswith("raw"):
                continue
            v = getattr(self, f.name)
            if _is_time(f):
                out[f.name + "_unix_ms"] = json_value(v) if v is not None else 0
            elif f.name in self._addresses and isinstance(v, int):
                out[f.name] = fmt.hex_addr(v)
            else:
                out[f.name] = json_value(v)
        return out

    def _repr_html_(self) -> str:
        pairs = [(f.name, getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
                 if not f.name.startswith("raw")]
        pairs = [(k, fmt.hex_addr(v) if k in self._addresses and isinstance(v, int) else v)
                 for k, v in pairs]
        return fmt.html_kv(pairs, caption=type(self).__name__)


def _public_dict(obj: DataclassInstance) -> Dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name != "raw"}


T = TypeVar("T", bound="DataclassInstance")  # the items are dataclasses


class ResultList(List[T], Generic[T]):
    """A list that renders as a table in notebooks."""

    columns: Sequence[str] = ()
    title: str = ""

    def _row(self, item: T) -> Sequence[object]:
        return [getattr(item, c) for c in self.columns]

    def to_dicts(self) -> List[Dict[str, object]]:
        """Each item's to_dict() (the JSON policy, json.dumps-ready)."""
        return [x.to_dict() if isinstance(x, JsonMixin) else _public_dict(x) for x in self]

    def to_dataframe(self) -> pd.DataFrame:
        """A pandas DataFrame (datetimes as datetimes, for plotting and
        filtering)."""
        import pandas as pd  # optional dependency
        return pd.DataFrame([_public_dict(x) for x in self])

    def _repr_html_(self) -> str:
        if not self:
            return f"<i>no {self.title or 'items'}</i>"
        return fmt.html_table(list(self.columns), (self._row(x) for x in self),
                              caption=f"{len(self)} {self.title}")

    def __str__(self) -> str:
        if not self:
            return f"no {self.title or 'items'}"
        return fmt.text_table(list(self.columns), (self._row(x) for x in self))


# ---- daemon ----

@dataclass
class StoreStats(JsonMixin):
    path: str
    captures: int
    unique_chunks: int
    raw_bytes: int
    stored_bytes: int
    pack_files: int
    logical_bytes: int
    chunk_size: int

    @classmethod
    def from_pb(cls, m: msg.StoreStats) -> "StoreStats":
        return cls(m.path, m.captures, m.unique_chunks, m.raw_bytes, m.stored_bytes,
                   m.pack_files, m.logical_bytes, m.chunk_size)

    @property
    def saved_ratio(self) -> Optional[float]:
        """logical / stored bytes (dedup + zero elision + compression)."""
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else None


@dataclass
class DaemonStatus(JsonMixin):
    version: str
    started: Optional[_dt.datetime]
    pid: int
    hostname: str
    unix_socket: str
    tcp_listen: str
    agent_socket: str
    store: StoreStats
    agents: int
    active_arms: int
    ingests_in_flight: int
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, m: msg.DaemonStatus) -> "DaemonStatus":
        return cls(m.version, fmt.from_unix_ms(m.started_unix_ms), m.pid, m.hostname,
                   m.unix_socket, m.tcp_listen, m.agent_socket, StoreStats.from_pb(m.store),
                   m.agents, m.active_arms, m.ingests_in_flight, raw=m)

    def _pairs(self) -> List[Tuple[str, object]]:
        s = self.store
        ratio = s.saved_ratio
        return [("kerncapd", f"{self.version} pid {self.pid} on {self.hostname}"),
                ("started", self.started), ("control socket", self.unix_socket),
                ("tcp listen", self.tcp_listen), ("agent socket", self.agent_socket),
                ("store", s.path), ("captures", s.captures),
                ("unique chunks", f"{s.unique_chunks} ({fmt.human_bytes(s.chunk_size)} each)"),
                ("logical size", fmt.human_bytes(s.logical_bytes)),
                ("raw unique", fmt.human_bytes(s.raw_bytes)),
                ("stored", f"{fmt.human_bytes(s.stored_bytes)} in {s.pack_files} pack files"),
                ("saved", f"{ratio:.2f}x (logical / stored)" if ratio else "-"),
                ("agents", self.agents), ("active arms", self.active_arms),
                ("ingests in flight", self.ingests_in_flight)]

    def _repr_html_(self) -> str:
        return fmt.html_kv(self._pairs(), caption="kerncapd status")

    def __str__(self) -> str:
        return "\n".join(f"{k:>18}  {fmt.cell(v)}" for k, v in self._pairs())


@dataclass
class Device(JsonMixin):
    ordinal: int
    name: str
    arch: str
    uuid: str = ""
    total_memory: int = 0
    pci_bus_id: str = ""

    @classmethod
    def from_pb(cls, m: msg.DeviceIdentity) -> "Device":
        return cls(m.ordinal, m.name, m.arch, m.uuid, m.total_memory, m.pci_bus_id)

    def __str__(self) -> str:
        return f"#{self.ordinal} {self.name or '-'} ({self.arch or '-'})"


@dataclass
class Driver(JsonMixin):
    driver_version: str
    runtime_version: str
    tool_version: str

    @classmethod
    def from_pb(cls, m: msg.DriverIdentity) -> "Driver":
        return cls(m.driver_version, m.runtime_version, m.tool_version)


@dataclass
class Process(JsonMixin):
    pid: int
    hostname: str
    process_name: str
    cmdline: List[str]

    @classmethod
    def from_pb(cls, m: msg.ProcessIdentity) -> "Process":
        return cls(m.pid, m.hostname, m.process_name, list(m.cmdline))


@dataclass
class Agent(JsonMixin):
    agent_id: str
    process: Process
    platform: Optional[str]
    devices: List[Device]
    driver: Driver
    connected: Optional[_dt.datetime]
    agent_version: str
    captures: int
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, m: msg.AgentInfo) -> "Agent":
        return cls(m.agent_id, Process.from_pb(m.process), _name(PLATFORMS, m.platform),
                   [Device.from_pb(d) for d in m.devices], Driver.from_pb(m.driver),
                   fmt.from_unix_ms(m.connected_unix_ms), m.agent_version, m.captures, raw=m)

    @property
    def pid(self) -> int:
        return self.process.pid


class AgentList(ResultList[Agent]):
    title = "agents"
    columns = ("agent_id", "pid", "process", "host", "platform", "devices", "connected",
               "captures")

    def _row(self, a: Agent) -> List[object]:
        return [a.agent_id, a.process.pid, a.process.process_name, a.process.hostname,
                a.platform, [f"{d.ordinal}:{d.name}" for d in a.devices], a.connected,
                a.captures]


# ---- the kernel census ----

@dataclass
class SampledLaunchConfig(JsonMixin):
    """One launch configuration of a sampled kernel and how often it ran."""
    grid: Tuple[int, ...]
    block: Tuple[int, ...]
    shared_mem_bytes: int
    cluster: Tuple[int, ...]
    launches: int


@dataclass
class LoadedKernel(JsonMixin):
    """One kernel a live agent's process has loaded (ListKernels). With
    kernels(sample=...): how often it ran during the sample (None: that agent
    was not sampled), its launch configurations (the most launched first, at
    most 8; other_config_launches counts the rest) and how many distinct
    argument shapes it ran with (argument_shapes_capped: more than 64).
    Counts are per kernel name: the first module of a name carries them."""
    mangled_name: str
    demangled_name: str
    module: str
    agent_id: str
    pid: int
    process_name: str
    launches: Optional[int] = None
    launch_configs: List[SampledLaunchConfig] = field(default_factory=list)
    other_config_launches: int = 0
    argument_shapes: int = 0
    argument_shapes_capped: bool = False

    @property
    def name(self) -> str:
        return self.demangled_name or self.mangled_name


@dataclass
class CensusNote(JsonMixin):
    """An agent that gave no (or a partial) census, and why."""
    agent_id: str
    pid: int
    process_name: str
    error: str
    left_out: int
    sample_error: str = ""  # kernels(sample=...): why this agent's launches were not counted


class KernelList(ResultList[LoadedKernel]):
    """The kernels of the live agents, one row per (process, kernel); `notes`
    names the agents that gave no census (older agents, no answer in time),
    left kernels out, or could not be sampled. Sampled listings are ordered
    by launches, the most launched first."""
    title = "kernels"
    columns: Sequence[str] = ("pid", "process_name", "name", "module")

    def __init__(self, items: Iterable[LoadedKernel] = (),
                 notes: Iterable[CensusNote] = (), sampled: bool = False) -> None:
        super().__init__(items)
        self.notes: List[CensusNote] = list(notes)
        self.sampled = sampled
        if sampled:
            self.columns = ("pid", "process_name", "name", "launches", "argument_shapes",
                            "module")

    @classmethod
    def from_pb(cls, resp: msg.ListKernelsResponse) -> "KernelList":
        items: List[LoadedKernel] = []
        notes: List[CensusNote] = []
        sampled = False
        for a in resp.agents:
            p = a.agent.process
            sampled = sampled or a.sampled or bool(a.sample_error)
            for k in a.kernels:
                configs = [SampledLaunchConfig(tuple(c.grid), tuple(c.block), c.shared_mem_bytes,
                                        tuple(c.cluster), c.launches)
                           for c in k.launch_configs]
                items.append(LoadedKernel(k.mangled_name, k.demangled_name, k.module,
                                          a.agent.agent_id, p.pid, p.process_name,
                                          k.launches if a.sampled else None, configs,
                                          k.other_config_launches, k.argument_shapes,
                                          k.argument_shapes_capped))
            if a.error or a.left_out or a.sample_error:
                notes.append(CensusNote(a.agent.agent_id, p.pid, p.process_name, a.error,
                                        a.left_out, a.sample_error))
        if sampled:
            items.sort(key=lambda k: -(k.launches or 0))
        return cls(items, notes, sampled)


# ---- arms ----

@dataclass
class Selector(JsonMixin):
    kernel: str = ""
    match: str = "substring"
    pid: int = 0
    process_name: str = ""
    device: Optional[int] = None
    skip: int = 0
    nth: int = 0
    count: int = 1
    rank: Optional[int] = None
    per_shape: str = "off"  # "off", "scalars" or "launch"

    @classmethod
    def from_pb(cls, m: msg.Selector) -> "Selector":
        return cls(m.kernel, MATCHES.get(m.match, "substring"), m.pid, m.process_name,
                   m.device if m.has_device else None, m.skip, m.nth, max(1, m.count),
                   m.rank if m.has_rank else None, PER_SHAPES.get(m.per_shape, "off"))

    def __str__(self) -> str:
        text = f'{self.match} "{self.kernel}"'
        for name in ("pid", "process_name", "skip", "nth"):
            if getattr(self, name):
                text += f" {name}={getattr(self, name)}"
        if self.device is not None:
            text += f" device={self.device}"
        if self.rank is not None:
            text += f" rank={self.rank}"
        if self.per_shape != "off":
            text += f" per-shape={self.per_shape}"
        return text


@dataclass
class Arm(JsonMixin):
    arm_id: str
    selector: Selector
    state: Optional[str]
    created: Optional[_dt.datetime]
    expires: Optional[_dt.datetime]
    captured: int
    capture_ids: List[str]
    tags: Dict[str, str]
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, m: msg.ArmInfo) -> "Arm":
        return cls(m.arm_id, Selector.from_pb(m.selector), _name(ARM_STATES, m.state),
                   fmt.from_unix_ms(m.created_unix_ms), fmt.from_unix_ms(m.expires_unix_ms),
                   m.captured, list(m.capture_ids), dict(m.tags), raw=m)

    @property
    def active(self) -> bool:
        return self.state == "active"

    def __str__(self) -> str:
        return self.arm_id

    def _repr_html_(self) -> str:
        return fmt.html_kv([("arm", self.arm_id), ("state", self.state),
                            ("selector", str(self.selector)),
                            ("captured", f"{self.captured}/{self.selector.count}"),
                            ("created", self.created), ("expires", self.expires),
                            ("tags", self.tags), ("captures", self.capture_ids)],
                           caption=f"arm {self.arm_id}")


class ArmList(ResultList[Arm]):
    title = "arms"
    columns = ("arm_id", "state", "selector", "captured", "created", "expires", "tags",
               "capture_ids")

    def _row(self, a: Arm) -> List[object]:
        return [a.arm_id, a.state, str(a.selector), f"{a.captured}/{a.selector.count}",
                a.created, a.expires, a.tags, a.capture_ids]


# ---- captures ----

@dataclass
class CaptureSummary(JsonMixin):
    capture_id: str
    created: Optional[_dt.datetime]
    kernel: str
    mangled_name: str
    platform: Optional[str]
    pid: int
    hostname: str
    process_name: str
    device: str
    regions: int
    logical_bytes: int
    new_stored_bytes: int
    source: Optional[str]
    tags: Dict[str, str]
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, m: msg.CaptureSummary) -> "CaptureSummary":
        return cls(m.capture_id, fmt.from_unix_ms(m.created_unix_ms), m.kernel, m.mangled_name,
                   _name(PLATFORMS, m.platform), m.pid, m.hostname, m.process_name, m.device,
                   m.regions, m.logical_bytes, m.new_stored_bytes, _name(SOURCES, m.source),
                   dict(m.tags), raw=m)

    @property
    def id(self) -> str:
        return self.capture_id

    def __str__(self) -> str:
        return self.capture_id


class CaptureList(ResultList[CaptureSummary]):
    title = "captures"
    columns = ("capture_id", "created", "kernel", "pid", "process", "device", "regions",
               "logical", "new stored", "source", "tags")

    def _row(self, s: CaptureSummary) -> List[object]:
        kernel = s.kernel if len(s.kernel) <= 48 else s.kernel[:45] + "..."
        return [s.capture_id, s.created, kernel, s.pid or None, s.process_name, s.device,
                s.regions, fmt.human_bytes(s.logical_bytes),
                fmt.human_bytes(s.new_stored_bytes), s.source, s.tags]

    @property
    def ids(self) -> List[str]:
        return [s.capture_id for s in self]


# ---- maintenance and transfers ----

@dataclass
class GcReport(JsonMixin):
    live_chunks: int
    dead_chunks: int
    reclaimed_bytes: int
    packs_deleted: int
    packs_rewritten: int
    seconds: float
    dry_run: bool

    @classmethod
    def from_pb(cls, m: msg.GcReport) -> "GcReport":
        return cls(m.live_chunks, m.dead_chunks, m.reclaimed_bytes, m.packs_deleted,
                   m.packs_rewritten, m.seconds, m.dry_run)


@dataclass
class VerifyProblem(JsonMixin):
    capture_id: str
    chunk_digest: str  # hex
    pack: str
    what: str


@dataclass
class VerifyReport(JsonMixin):
    chunks_checked: int
    chunks_total: int
    problems: List[VerifyProblem]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class ExportResult(JsonMixin):
    capture_id: str
    path: str
    chunks: int
    raw_bytes: int
    file_bytes: int


@dataclass
class ImportResult(JsonMixin):
    capture_id: str
    chunks_received: int
    chunks_already_present: int

    @classmethod
    def from_pb(cls, m: msg.ImportCaptureResponse) -> "ImportResult":
        return cls(m.capture_id, m.chunks_received, m.chunks_already_present)


class ProjectSource(TypedDict, total=False):
    """kerncap.json's "source": how the kernel's sources were looked for."""
    outcome: str  # "found", "no_line_info", "sources_not_found", "not_searched", ...
    message: str
    translation_unit: Dict[str, Optional[str]]  # original, project
    headers: List[str]
    line_table_files: List[str]
    tried: List[str]
    databases_tried: List[str]
    remap: Dict[str, str]  # from, to
    unit_selection: JSONObject
    include_closure: JSONObject
    dwarf_warnings: List[str]


class ProjectCodeObject(TypedDict, total=False):
    """kerncap.json's "code_object": the captured code object in the project."""
    file: str  # "code/kernel.cubin"
    format: str
    disassembly: Optional[str]
    disassembler: str
    note: str


class ProjectManifest(TypedDict, total=False):
    """A reproducer project's kerncap.json (reproducer/generator/project_manifest.h;
    fields are only ever added). The sections this client does not read are
    plain JSON objects. {"unparsed": TEXT} when the daemon sent text that is
    not JSON."""
    schema: str  # "kerncap.reproducer"
    schema_version: int
    generator: str
    kind: str  # "source", "binary" or "triton"
    kernel: JSONObject
    launch: JSONObject
    arguments: List[JSONObject]
    code_object: ProjectCodeObject
    toolkit: JSONObject
    compile: JSONObject
    source: ProjectSource
    provenance: JSONObject
    files: List[JSONObject]
    edit: JSONObject
    triton: JSONObject
    warnings: List[str]
    unparsed: str


@dataclass
class ReproResult(JsonMixin):
    """A reproducer project: `path` is a local folder (files streamed back) or,
    with on_daemon=True, the folder on the daemon host."""
    capture_id: str
    path: str
    files: List[str]
    on_daemon: bool = False
    # kerncap.json of the project (what was generated, from which sources),
    # when the daemon sends it.
    project: Optional[ProjectManifest] = None

    def _repr_html_(self) -> str:
        where = "on the daemon's host" if self.on_daemon else "here"
        return fmt.html_table(["file"], ([f] for f in self.files),
                              caption=f"reproducer of {self.capture_id} in {self.path} ({where}, "
                                      f"{len(self.files)} files)")


# Event.data: the converted payload, or the message (CaptureStarted,
# CaptureProgress, CaptureFailed) for the other kinds.
EventData = Union[CaptureSummary, "Arm", "Agent", ProtoMessage, None]


@dataclass
class Event(JsonMixin):
    """One WatchEvents event. `kind` is the oneof case ("capture_committed",
    "arm_changed", ...); `data` its converted payload (CaptureSummary, Arm,
    Agent) or the raw message for the others."""
    time: Optional[_dt.datetime]
    kind: Optional[str]
    data: EventData
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, m: msg.Event) -> "Event":
        kind = m.WhichOneof("kind")
        payload = getattr(m, kind) if kind else None
        data: EventData
        if kind == "capture_committed":
            data = CaptureSummary.from_pb(m.capture_committed)
        elif kind == "arm_changed":
            data = Arm.from_pb(m.arm_changed)
        elif kind in ("agent_joined", "agent_left"):
            data = Agent.from_pb(m.agent_joined if kind == "agent_joined" else m.agent_left)
        else:
            data = payload
        return cls(fmt.from_unix_ms(m.unix_ms), kind, data, raw=m)
