"""Small formatting helpers shared by the text and HTML representations."""
from __future__ import annotations

import datetime as _dt
import html
from typing import Iterable, Optional, Sequence


def from_unix_ms(ms: int) -> Optional[_dt.datetime]:
    """UTC datetime, or None for 0 (the protocol's "unset")."""
    if not ms:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)


def human_bytes(n: Optional[float]) -> str:
    """The same text as kerncapctl (client/kerncapctl/output.cc HumanBytes):
    512 B, 1.50 KiB, 10.0 MiB, 300 GiB (3 significant digits), up to PiB."""
    if n is None:
        return "-"
    n = float(n)
    if abs(n) < 1024:
        return f"{int(n)} B"
    unit = 0
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    while abs(n) >= 1024 and unit < len(units) - 1:
        n /= 1024
        unit += 1
    if abs(n) < 10:
        return f"{n:.2f} {units[unit]}"
    if abs(n) < 100:
        return f"{n:.1f} {units[unit]}"
    return f"{n:.0f} {units[unit]}"


def hex_addr(v: Optional[int]) -> str:
    return "-" if v is None else f"0x{v:x}"


def fmt_time(t: Optional[_dt.datetime]) -> str:
    if t is None:
        return "-"
    return t.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, _dt.datetime):
        return fmt_time(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


_STYLE = ("border-collapse:collapse;font-family:monospace;font-size:12px;"
          "text-align:left")


def html_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *,
               caption: Optional[str] = None, highlight: Optional[Sequence[bool]] = None) -> str:
    """A plain HTML table; `highlight[i]` marks row i (post-written regions,
    failing regions)."""
    out = [f'<table style="{_STYLE}">']
    if caption:
        out.append(f'<caption style="text-align:left;font-weight:bold">{html.escape(caption)}'
                   "</caption>")
    out.append("<thead><tr>" + "".join(
        f'<th style="padding:2px 8px;border-bottom:1px solid #888">{html.escape(h)}</th>'
        for h in headers) + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        style = ' style="background:#fde2e1"' if highlight and highlight[i] else ""
        out.append(f"<tr{style}>" + "".join(
            f'<td style="padding:2px 8px">{html.escape(cell(v))}</td>' for v in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def html_kv(pairs: Iterable[Sequence[object]], *, caption: Optional[str] = None) -> str:
    """A two-column key/value table."""
    out = [f'<table style="{_STYLE}">']
    if caption:
        out.append(f'<caption style="text-align:left;font-weight:bold">{html.escape(caption)}'
                   "</caption>")
    for key, value in pairs:
        out.append(f'<tr><th style="padding:2px 8px;text-align:right">{html.escape(str(key))}'
                   f'</th><td style="padding:2px 8px">{html.escape(cell(value))}</td></tr>')
    out.append("</table>")
    return "".join(out)


def text_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[cell(v) for v in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, r)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)
