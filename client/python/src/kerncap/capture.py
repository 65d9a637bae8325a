"""One captured kernel dispatch, as kerncapd describes it (GetCapture or the
manifest of a .kcap file): kernel, launch configuration, arguments, memory
map (pre-dispatch regions and the post-dispatch diff), code objects, sizes.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Callable, Dict, List, Literal, Optional, Tuple, TypedDict,
                    Union, cast, overload)

from google.protobuf.message import Message as ProtoMessage

from . import _format as fmt
from ._types import JSONObject, JSONValue, PathLike
from .models import (ARG_KINDS, CODE_FORMATS, PLATFORMS, REGION_KINDS, SOURCES, CaptureSummary,
                     Device, Driver, JsonMixin, Process, json_value)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from . import _messages as msg


@dataclass
class KernelInfo(JsonMixin):
    name: str          # demangled
    mangled_name: str
    platform: Optional[str]
    arch: str
    code_object_digest: str  # hex, "" when unknown
    jit_metadata: Optional[JSONObject]  # Triton/JIT metadata (python_shim), if any

    @classmethod
    def from_pb(cls, m: msg.KernelIdentity) -> "KernelInfo":
        meta: Optional[JSONObject] = None
        if m.jit_metadata_json:
            try:
                meta = json.loads(m.jit_metadata_json)
            except ValueError:
                meta = {"unparsed": m.jit_metadata_json}
        return cls(m.demangled_name, m.mangled_name, PLATFORMS.get(m.platform), m.arch,
                   m.code_object_digest.hex(), meta)

    def __str__(self) -> str:
        return self.name or self.mangled_name


@dataclass
class LaunchConfig(JsonMixin):
    grid: List[int]
    block: List[int]
    shared_mem_bytes: int
    private_mem_bytes: int
    cluster: List[int]
    cooperative: bool
    stream: int
    attributes: Dict[str, int]

    _addresses = ("stream",)

    @classmethod
    def from_pb(cls, m: msg.LaunchConfig) -> "LaunchConfig":
        return cls(list(m.grid), list(m.block), m.shared_mem_bytes, m.private_mem_bytes,
                   list(m.cluster), m.cooperative, m.stream, dict(m.attributes))

    def __str__(self) -> str:
        dims: Callable[[List[int]], str] = (
            lambda d: "x".join(map(str, d)) if d else "-")  # noqa: E731
        text = (f"grid {dims(self.grid)}  block {dims(self.block)}  shared "
                f"{fmt.human_bytes(self.shared_mem_bytes)}")
        if self.cluster:
            text += f"  cluster {dims(self.cluster)}"
        if self.cooperative:
            text += "  cooperative"
        return text


@dataclass
class Argument(JsonMixin):
    index: int
    offset: int
    size: int
    kind: Optional[str]  # "value", "pointer", "hidden"
    name: str
    type_name: str
    value_kind: str
    raw_bytes: bytes

    @property
    def value(self) -> Union[int, bytes, None]:
        """Little-endian integer for arguments of at most 8 bytes (pointers
        included), else the raw bytes; None when outside the argument blob."""
        if len(self.raw_bytes) != self.size or self.size == 0:
            return None
        if self.size <= 8:
            return int.from_bytes(self.raw_bytes, "little")
        return self.raw_bytes

    def value_text(self) -> str:
        v = self.value
        if v is None:
            return "-"
        if isinstance(v, bytes):
            return v[:16].hex() + ("..." if len(v) > 16 else "")
        if self.kind == "pointer":
            return f"0x{v:x}"
        return f"{v} (0x{v:x})"


@dataclass
class Region(JsonMixin):
    """One pre-dispatch region (an allocation or module variable) with what
    the post-dispatch image says about it."""
    index: int
    va: int
    size: int
    kind: Optional[str]
    device: int
    name: str
    chunk_size: int
    chunks: int
    zero_chunks: int
    written: bool                 # the kernel changed at least one chunk
    changed_chunks: List[int]     # chunk indices that differ after the dispatch
    post: bool = True             # the post-dispatch image covers it
    pre: bool = True              # False: only in the post-dispatch image
    raw: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)
    raw_post: Optional[ProtoMessage] = field(default=None, repr=False, compare=False)

    _addresses = ("va",)

    @property
    def end(self) -> int:
        return self.va + self.size

    @property
    def changed_bytes(self) -> int:
        total = 0
        for c in self.changed_chunks:
            total += max(0, min(self.chunk_size, self.size - c * self.chunk_size))
        return total

    def contains(self, address: int) -> bool:
        return self.va <= address < self.end


def _chunk_count(size: int, chunk_size: int) -> int:
    return (size + chunk_size - 1) // chunk_size if chunk_size else 0


def _changed(pre: Optional[msg.Region], post: Optional[msg.Region]) -> List[int]:
    if post is None:
        return []
    if post.diff:
        return list(post.changed_chunks)
    # A complete post image: compare digests chunk by chunk.
    a, b = list(pre.data.chunk_digests) if pre is not None else [], list(post.data.chunk_digests)
    return [i for i in range(len(b)) if i >= len(a) or a[i] != b[i]]


def _regions(manifest: msg.CaptureManifest) -> List[Region]:
    post_by_va = {r.va: r for r in manifest.post.regions}
    out: List[Region] = []
    seen = set()
    for i, r in enumerate(manifest.pre.regions):
        post = post_by_va.get(r.va)
        seen.add(r.va)
        changed = _changed(r, post)
        out.append(Region(
            index=i, va=r.va, size=r.data.size, kind=REGION_KINDS.get(r.kind), device=r.device,
            name=r.name, chunk_size=r.data.chunk_size,
            chunks=_chunk_count(r.data.size, r.data.chunk_size),
            zero_chunks=sum(1 for d in r.data.chunk_digests if not d),
            written=bool(changed), changed_chunks=changed, post=post is not None,
            raw=r, raw_post=post))
    for r in manifest.post.regions:
        if r.va in seen:
            continue
        changed = _changed(None, r) if not r.diff else list(r.changed_chunks)
        out.append(Region(
            index=len(out), va=r.va, size=r.data.size, kind=REGION_KINDS.get(r.kind),
            device=r.device, name=r.name, chunk_size=r.data.chunk_size,
            chunks=_chunk_count(r.data.size, r.data.chunk_size), zero_chunks=0,
            written=bool(changed), changed_chunks=changed, pre=False, raw_post=r))
    return out


@dataclass
class CodeObject(JsonMixin):
    name: str
    format: Optional[str]
    size: int
    digest: str  # hex

    @classmethod
    def from_pb(cls, m: msg.CodeObject) -> "CodeObject":
        return cls(m.name, CODE_FORMATS.get(m.format), m.data.size, m.digest.hex())


@dataclass
class CaptureStats(JsonMixin):
    logical_bytes: int
    zero_bytes: int
    new_raw_bytes: int
    new_stored_bytes: int
    dedup_bytes: int
    chunk_count: int
    ingest_seconds: float

    @classmethod
    def from_pb(cls, m: msg.CaptureStats) -> "CaptureStats":
        return cls(m.logical_bytes, m.zero_bytes, m.new_raw_bytes, m.new_stored_bytes,
                   m.dedup_bytes, m.chunk_count, m.ingest_seconds)


class MemoryMapRow(TypedDict):
    """One row of Capture.memory_map() (as a list of dicts)."""
    va_hex: str
    end_hex: str
    size: int
    kind: Optional[str]
    device: int
    name: str
    index: int
    va: int
    end: int
    chunks: int
    zero_chunks: int
    written: bool
    changed_chunks: int  # how many
    changed_bytes: int
    image: str  # "pre" or "post-only"


class CaptureRegionDict(TypedDict):
    """A region in Capture.to_dict()."""
    va: str  # "0x..."
    end: str
    size: int
    kind: Optional[str]
    device: int
    name: str
    index: int
    chunks: int
    zero_chunks: int
    written: bool
    changed_chunks: List[int]
    pre: bool
    post: bool


class CaptureArgumentDict(TypedDict):
    """An argument in Capture.to_dict()."""
    offset: int
    size: int
    kind: Optional[str]
    name: str
    type: str
    value: JSONValue  # pointers "0x...", other values of <= 8 bytes an int, else hex


class CaptureDict(TypedDict):
    """Capture.to_dict(): the capture under the JSON policy (docs/JSON.md)."""
    capture_id: str
    created_unix_ms: int
    source: Optional[str]
    kernel: str
    mangled_name: str
    platform: Optional[str]
    arch: str
    pid: int
    process_name: str
    hostname: str
    device: str
    launch: JSONObject
    arguments: List[CaptureArgumentDict]
    regions: List[CaptureRegionDict]
    tags: Dict[str, str]
    dispatch_index: int
    arm_id: str
    post_complete: bool
    stats: JSONObject
    code_objects: List[JSONObject]


# Hex addresses first (what people read), the integer forms (for arithmetic)
# after the region's facts.
MEMORY_MAP_COLUMNS = ("va_hex", "end_hex", "size", "kind", "device", "name", "index", "va", "end",
                      "chunks", "zero_chunks", "written", "changed_chunks", "changed_bytes",
                      "image")


class Capture:
    """A capture's full description. Get one with `client.capture(id)` or,
    without a daemon, `Capture.from_kcap("file.kcap")`."""

    def __init__(self, manifest: msg.CaptureManifest, *,
                 summary: Optional[msg.CaptureSummary] = None,
                 exclusive_raw_bytes: Optional[int] = None,
                 stored_bytes: Optional[int] = None) -> None:
        m = manifest
        self.manifest = m  # the kerncap.v1.CaptureManifest
        self.id: str = m.capture_id
        self.created: Optional[_dt.datetime] = fmt.from_unix_ms(m.created_unix_ms)
        self.source: Optional[str] = SOURCES.get(m.source)
        self.kernel = KernelInfo.from_pb(m.kernel)
        self.process = Process.from_pb(m.process)
        self.device = Device.from_pb(m.device)
        self.driver = Driver.from_pb(m.driver)
        self.launch = LaunchConfig.from_pb(m.launch)
        self.argument_blob: bytes = bytes(m.argument_blob)
        self.arguments: List[Argument] = [
            Argument(i, a.offset, a.size, ARG_KINDS.get(a.kind), a.name, a.type_name,
                     a.value_kind, self.argument_blob[a.offset:a.offset + a.size])
            for i, a in enumerate(m.arguments)]
        self.regions: List[Region] = _regions(m)
        self.code_objects = [CodeObject.from_pb(c) for c in m.code_objects]
        self.stats = CaptureStats.from_pb(m.stats)
        self.dispatch_index: int = m.dispatch_index
        self.arm_id: str = m.arm_id
        self.tags: Dict[str, str] = dict(m.tags)
        self.post_complete: bool = m.post_complete
        self.summary: Optional[CaptureSummary] = (
            CaptureSummary.from_pb(summary) if summary is not None else None)
        self.exclusive_raw_bytes = exclusive_raw_bytes  # None for .kcap files
        self.stored_bytes = stored_bytes

    # ---- construction ----

    @classmethod
    def from_detail(cls, detail: msg.CaptureDetail) -> "Capture":
        return cls(detail.manifest, summary=detail.summary,
                   exclusive_raw_bytes=(None if detail.exclusive_pending
                                        else detail.exclusive_raw_bytes),
                   stored_bytes=detail.stored_bytes)

    @classmethod
    def from_kcap(cls, path: PathLike) -> "Capture":
        """Reads only the manifest record of a .kcap file (no daemon needed)."""
        from .kcap import read_manifest
        return cls(read_manifest(path))

    # ---- views ----

    @property
    def capture_id(self) -> str:
        return self.id

    @property
    def pre_regions(self) -> List[Region]:
        return [r for r in self.regions if r.pre]

    @property
    def written_regions(self) -> List[Region]:
        return [r for r in self.regions if r.written]

    def region(self, key: Union[int, str]) -> Region:
        """By index, by name (module globals, synthetic buffers) or by an
        address inside it."""
        if isinstance(key, int):
            for r in self.regions:
                if r.contains(key):
                    return r
            if 0 <= key < len(self.regions):
                return self.regions[key]
        else:
            for r in self.regions:
                if r.name == key:
                    return r
        raise KeyError(f"no region {key!r} in {self.id}")

    def region_of(self, address: int) -> Optional[Region]:
        """The pre-dispatch region containing `address`, if any."""
        for r in self.regions:
            if r.pre and r.contains(address):
                return r
        return None

    @overload
    def memory_map(self, *, as_frame: Literal[False]) -> List[MemoryMapRow]: ...

    @overload
    def memory_map(self, *, as_frame: Literal[True]) -> pd.DataFrame: ...

    @overload
    def memory_map(self, *,
                   as_frame: Optional[bool] = None) -> Union[pd.DataFrame, List[MemoryMapRow]]: ...

    def memory_map(self, *,
                   as_frame: Optional[bool] = None) -> Union[pd.DataFrame, List[MemoryMapRow]]:
        """One row per region, sorted by address: va_hex, end_hex ("0x..."),
        size, kind, device, name, index, va, end (integers), chunks,
        zero_chunks, written, changed_chunks (count), changed_bytes, image ("pre", or "post-only" for a region
        only the post-dispatch image has). A pandas DataFrame when pandas is
        installed (as_frame=None) or requested (True), else a list of dicts."""
        rows: List[MemoryMapRow] = [
                {"va_hex": fmt.hex_addr(r.va), "end_hex": fmt.hex_addr(r.end), "size": r.size,
                 "kind": r.kind, "device": r.device, "name": r.name, "index": r.index,
                 "va": r.va, "end": r.end,
                 "chunks": r.chunks, "zero_chunks": r.zero_chunks, "written": r.written,
                 "changed_chunks": len(r.changed_chunks), "changed_bytes": r.changed_bytes,
                 "image": "pre" if r.pre else "post-only"}
                for r in sorted(self.regions, key=lambda r: r.va)]
        if as_frame is False:
            return rows
        try:
            import pandas as pd
        except ImportError:
            if as_frame:
                raise
            return rows
        return pd.DataFrame(rows, columns=list(MEMORY_MAP_COLUMNS))

    def plot_memory_map(self, ax: Optional[Axes] = None, *, max_gap_fraction: float = 0.05,
                        show_chunks: bool = True) -> Axes:
        """Draws the regions as bars over the address space (matplotlib).

        Address ranges between regions that are larger than
        `max_gap_fraction` of the mapped bytes are drawn compressed (marked
        with a dashed line) so that a few small buffers far apart stay
        visible. Regions the kernel wrote are outlined in red, and with
        `show_chunks` the changed chunks are shaded. Returns the Axes."""
        try:
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch, Rectangle
        except ImportError as e:
            raise ImportError("plot_memory_map needs matplotlib (pip install matplotlib)") from e
        regions = sorted(self.regions, key=lambda r: r.va)
        created: Optional[Figure] = None  # the figure made here
        if ax is None:
            created, ax = plt.subplots(figsize=(10, 2.2 + 0.45 * max(1, len(regions))))
        if not regions:
            ax.set_title(f"{self.id}: no regions")
            return ax
        total = sum(r.size for r in regions) or 1
        max_gap = max(1, int(total * max_gap_fraction))
        # Map addresses to a compressed axis: big gaps shrink to max_gap.
        # `cursor` is always the drawn position of `prev_end` (the highest
        # address covered so far).
        x_of, cursor, prev_end, breaks = [], 0, regions[0].va, []
        for r in regions:
            gap = r.va - prev_end
            if gap > max_gap:
                cursor += max_gap
                breaks.append(cursor - max_gap / 2)
            else:
                cursor += gap  # negative for overlapping regions
            x_of.append(cursor)
            if r.end >= prev_end:
                cursor, prev_end = cursor + r.size, r.end
            else:
                cursor += prev_end - r.va
        colors = {"device": "#4c72b0", "device_vmm": "#55a868", "managed": "#8172b2",
                  "host_pinned": "#937860", "module_global": "#da8bc3", "constant": "#ccb974",
                  "kernarg": "#64b5cd"}
        for row, (r, x) in enumerate(zip(regions, x_of)):
            color = colors.get(r.kind or "", "#8c8c8c")
            ax.add_patch(Rectangle((x, row - 0.35), max(r.size, total * 0.002), 0.7,
                                   facecolor=color, alpha=0.85,
                                   edgecolor="#d62728" if r.written else "none",
                                   linewidth=2 if r.written else 0))
            if show_chunks and r.chunk_size:
                for c in r.changed_chunks:
                    start = c * r.chunk_size
                    width = min(r.chunk_size, r.size - start)
                    ax.add_patch(Rectangle((x + start, row - 0.35), width, 0.7,
                                           facecolor="#d62728", alpha=0.45, edgecolor="none"))
            label = f"{r.name or r.kind} {fmt.hex_addr(r.va)} ({fmt.human_bytes(r.size)})"
            ax.text(x, row + 0.42, label, fontsize=7, va="bottom")
        for b in breaks:
            ax.axvline(b, color="#999", linestyle="--", linewidth=0.8)
        ax.set_xlim(-total * 0.01, cursor + total * 0.01)
        ax.set_ylim(-0.8, len(regions) - 0.2)
        ax.set_yticks(range(len(regions)))
        ax.set_yticklabels([str(r.index) for r in regions])
        ax.set_ylabel("region")
        ax.set_xticks(x_of)
        ax.set_xticklabels([fmt.hex_addr(r.va) for r in regions], rotation=30, ha="right",
                           fontsize=7)
        ax.set_xlabel("virtual address (gaps compressed at the dashed lines)" if breaks
                      else "virtual address")
        kinds = sorted({r.kind or "-" for r in regions})
        handles = [Patch(facecolor=colors.get(k, "#8c8c8c"), label=k) for k in kinds]
        handles.append(Patch(facecolor="white", edgecolor="#d62728", linewidth=2,
                             label="written by the kernel"))
        if show_chunks:
            handles.append(Patch(facecolor="#d62728", alpha=0.45, label="changed chunks"))
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title(f"{self.id}: {self.kernel} — {len(regions)} regions, "
                     f"{len(self.written_regions)} written", fontsize=9)
        if created is not None:
            created.tight_layout()
        return ax

    def to_dict(self) -> CaptureDict:
        """The capture under the JSON policy (docs/JSON.md): json.dumps-ready,
        addresses as "0x..." strings, times as *_unix_ms integers."""
        def arg_value(a: Argument) -> JSONValue:
            v = a.value
            if a.kind == "pointer" and isinstance(v, int):
                return fmt.hex_addr(v)
            return json_value(v)
        regions: List[CaptureRegionDict] = [
                   {"va": fmt.hex_addr(r.va), "end": fmt.hex_addr(r.end), "size": r.size,
                    "kind": r.kind, "device": r.device, "name": r.name, "index": r.index,
                    "chunks": r.chunks, "zero_chunks": r.zero_chunks, "written": r.written,
                    "changed_chunks": list(r.changed_chunks), "pre": r.pre, "post": r.post}
                   for r in sorted(self.regions, key=lambda r: r.va)]
        return {
            "capture_id": self.id,
            "created_unix_ms": cast(int, json_value(self.created) or 0),
            "source": self.source,
            "kernel": self.kernel.name, "mangled_name": self.kernel.mangled_name,
            "platform": self.kernel.platform, "arch": self.kernel.arch,
            "pid": self.process.pid, "process_name": self.process.process_name,
            "hostname": self.process.hostname, "device": self.device.name,
            "launch": self.launch.to_dict(),
            "arguments": [{"offset": a.offset, "size": a.size, "kind": a.kind, "name": a.name,
                           "type": a.type_name, "value": arg_value(a)} for a in self.arguments],
            "regions": regions, "tags": self.tags,
            "dispatch_index": self.dispatch_index, "arm_id": self.arm_id,
            "post_complete": self.post_complete, "stats": self.stats.to_dict(),
            "code_objects": [c.to_dict() for c in self.code_objects],
        }

    # ---- display ----

    def _head(self) -> List[Tuple[str, object]]:
        return [("capture", self.id),
                ("created", f"{fmt.fmt_time(self.created)}  source {self.source or '-'}  arm "
                            f"{self.arm_id or '-'}  dispatch #{self.dispatch_index}"),
                ("kernel", self.kernel.name), ("mangled", self.kernel.mangled_name),
                ("platform", f"{self.kernel.platform or '-'}  arch {self.kernel.arch or '-'}"),
                ("process", f"pid {self.process.pid}  {self.process.process_name or '-'}  on "
                            f"{self.process.hostname or '-'}"),
                ("device", f"{self.device}  driver {self.driver.driver_version or '-'}  runtime "
                           f"{self.driver.runtime_version or '-'}"),
                ("launch", str(self.launch)), ("tags", self.tags),
                ("sizes", f"logical {fmt.human_bytes(self.stats.logical_bytes)}, zero "
                          f"{fmt.human_bytes(self.stats.zero_bytes)}, dedup "
                          f"{fmt.human_bytes(self.stats.dedup_bytes)}, new stored "
                          f"{fmt.human_bytes(self.stats.new_stored_bytes)}")]

    def _argument_rows(self) -> List[List[object]]:
        rows: List[List[object]] = []
        for a in self.arguments:
            target = ""
            if a.kind == "pointer" and isinstance(a.value, int):
                r = self.region_of(a.value)
                if r is not None:
                    target = f"region {r.index} {r.name}".strip() + (
                        f" +0x{a.value - r.va:x}" if a.value != r.va else "")
            rows.append([a.offset, a.size, a.kind, a.name, a.type_name or a.value_kind,
                         a.value_text(), target])
        return rows

    def _region_rows(self) -> Tuple[List[List[object]], List[bool]]:
        regions = sorted(self.regions, key=lambda r: r.va)
        rows: List[List[object]] = [
                [r.index, fmt.hex_addr(r.va), fmt.hex_addr(r.end), r.kind, r.device,
                 fmt.human_bytes(r.size), f"{r.zero_chunks}/{r.chunks}", r.name,
                 (f"{len(r.changed_chunks)} of {r.chunks} chunks" if r.written else "")
                 + ("" if r.pre else " (post only)")]
                for r in regions]
        return rows, [r.written for r in regions]

    _ARG_HEAD = ("offset", "size", "kind", "name", "type", "value", "points to")
    _MAP_HEAD = ("#", "va start", "va end", "kind", "dev", "size", "zero chunks", "name",
                 "written")

    def _repr_html_(self) -> str:
        rows, hl = self._region_rows()
        return "".join([
            fmt.html_kv(self._head(), caption=f"capture {self.id}"),
            fmt.html_table(self._ARG_HEAD, self._argument_rows(),
                           caption=f"arguments ({len(self.arguments)}, blob "
                                   f"{len(self.argument_blob)} B)"),
            fmt.html_table(self._MAP_HEAD, rows, highlight=hl,
                           caption=f"memory map ({len(rows)} regions; post-dispatch "
                                   f"{'complete' if self.post_complete else 'not taken or partial'};"
                                   " written regions highlighted)"),
        ])

    def __str__(self) -> str:
        rows, _ = self._region_rows()
        return "\n".join([
            "\n".join(f"{k:>9}  {fmt.cell(v)}" for k, v in self._head()), "",
            f"arguments ({len(self.arguments)})",
            fmt.text_table(self._ARG_HEAD, self._argument_rows()), "",
            f"memory map ({len(rows)} regions)", fmt.text_table(self._MAP_HEAD, rows)])

    def __repr__(self) -> str:
        return (f"<Capture {self.id} {self.kernel.name!r} {len(self.regions)} regions "
                f"{fmt.human_bytes(self.stats.logical_bytes)}>")
