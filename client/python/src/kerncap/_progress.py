"""Progress reporting for long transfers (export, import, verify).

`progress` arguments accept:
  None   (default) a tqdm bar when tqdm is installed (tqdm.auto: a widget in
         notebooks when ipywidgets is installed, text otherwise), else nothing
  True   tqdm when installed, else a plain line on stderr now and then
  False  nothing
  a callable  called as progress(done, total) with byte (or chunk) counts
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Dict, Optional, Protocol, cast

from ._types import ProgressArg, ProgressCallback

__all__ = ["Bar", "ProgressArg", "make"]


class _TqdmBar(Protocol):
    """What is used of a tqdm bar (tqdm is an optional import)."""
    total: Optional[float]

    def update(self, n: float) -> object: ...

    def refresh(self) -> object: ...

    def close(self) -> object: ...


_TqdmClass = Callable[..., _TqdmBar]  # tqdm(total=..., desc=..., leave=..., unit=...)


class _Null:
    def update(self, done: int) -> None:
        pass

    def set_total(self, total: int) -> None:
        pass

    def close(self) -> None:
        pass


class _Callback(_Null):
    def __init__(self, fn: ProgressCallback, total: int) -> None:
        self.fn, self.total = fn, total

    def set_total(self, total: int) -> None:
        self.total = total

    def update(self, done: int) -> None:
        self.fn(done, self.total)


class _Tqdm(_Null):
    def __init__(self, tqdm_cls: _TqdmClass, desc: str, total: int, unit_bytes: bool) -> None:
        kwargs: Dict[str, object] = (dict(unit="B", unit_scale=True, unit_divisor=1024)
                                     if unit_bytes else {})
        self.bar = tqdm_cls(total=total or None, desc=desc, leave=False, **kwargs)
        self.done = 0

    def set_total(self, total: int) -> None:
        self.bar.total = total
        self.bar.refresh()

    def update(self, done: int) -> None:
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        self.bar.close()


class _Text(_Null):
    """Fallback when tqdm is missing: one stderr line at most twice a second."""

    def __init__(self, desc: str, total: int, unit_bytes: bool) -> None:
        self.desc, self.total, self.unit_bytes = desc, total, unit_bytes
        self.last = 0.0
        self.done = 0

    def set_total(self, total: int) -> None:
        self.total = total

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self.last >= 0.5:
            self.last = now
            self._print("\r")

    def _print(self, end: str) -> None:
        from ._format import human_bytes
        f = human_bytes if self.unit_bytes else str
        pct = f" {100.0 * self.done / self.total:5.1f}%" if self.total else ""
        sys.stderr.write(f"\r{self.desc}: {f(self.done)} / {f(self.total)}{pct}{end}")
        sys.stderr.flush()

    def close(self) -> None:
        self._print("\n")


def _tqdm() -> Optional[_TqdmClass]:
    try:
        import importlib.util
        if importlib.util.find_spec("ipywidgets") is None:
            # tqdm.auto in Jupyter without ipywidgets prints a warning and
            # leaves its bar at 0%: text bars instead (the notebook extra
            # installs ipywidgets for the widget ones).
            from tqdm.std import tqdm
        else:
            from tqdm.auto import tqdm
        return cast(_TqdmClass, tqdm)
    except Exception:  # tqdm missing, or its notebook widget support broken
        return None


Bar = _Null  # what make() returns: update(done), set_total(total), close()


def make(progress: ProgressArg, desc: str, total: int = 0, unit_bytes: bool = True) -> Bar:
    if progress is False:
        return _Null()
    if callable(progress):  # (True is not callable)
        return _Callback(progress, total)
    tqdm = _tqdm()
    if tqdm is not None:
        return _Tqdm(tqdm, desc, total, unit_bytes)
    if progress is True:
        return _Text(desc, total, unit_bytes)
    return _Null()

