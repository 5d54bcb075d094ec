"""Progress bars that suit notebooks, terminals and log files.

Bars are ``tqdm.auto`` bars: in a Jupyter kernel an ipywidgets progress bar (the ``notebook``
extra installs ipywidgets), on a terminal a plain ``tqdm`` bar. When stderr is not a TTY (CI logs, ``nohup``, a pipe)
the bar is written as whole lines, without carriage returns or ANSI escape codes, at most every
``log_interval`` seconds, so a log stays readable:
``capture:  40%|####      | 4/10 [00:02<00:03, 2.0batch/s]``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from tqdm.auto import tqdm

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def in_notebook() -> bool:
    """Whether ``tqdm.auto`` chose its notebook (widget) bar: this process is a Jupyter kernel."""
    return any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__)


@runtime_checkable
class _TextSink(Protocol):
    """What :class:`_LineWriter` writes to: ``sys.stderr``, a log file, pytest's capture."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class _LineWriter:
    r"""A file-like sink turning tqdm's ``\r`` redraws into newline-terminated log lines."""

    def __init__(self, stream: _TextSink) -> None:
        self.stream = stream
        self.last = ""

    def write(self, text: str) -> int:
        line = _ANSI.sub("", text).replace("\r", "").strip()
        if line and line != self.last:
            self.stream.write(line + "\n")
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    enabled: bool = True,
    initial: int = 0,
    leave: bool = True,
    log_interval: float | int = 10.0,
) -> tqdm:
    """A ``tqdm.auto`` bar over ``iterable`` (or a manual bar).

    A widget in a notebook, a live bar on a TTY, log lines otherwise.

    Args:
        iterable: what to iterate (None for a manual bar updated with ``.update(n)``).
        desc: the phase shown before the bar, e.g. ``"capture"``.
        total: number of items, when ``iterable`` has no ``len``.
        unit: what one item is (``"batch"``, ``"step"``...).
        enabled: False hides the bar entirely (``--quiet``/``progress=False``).
        initial: items already done (a resumed run).
        leave: keep the finished bar on screen.
        log_interval: seconds between lines when stderr is not a TTY (nor a notebook).
    """
    stream = sys.stderr
    is_tty = bool(getattr(stream, "isatty", lambda: False)())
    options: dict[str, Any] = {
        "desc": desc, "total": total, "unit": unit, "disable": not enabled, "initial": initial,
    }
    if is_tty or in_notebook():
        return tqdm(iterable, leave=leave, **options)
    return tqdm(
        iterable, file=_LineWriter(stream), ascii=True, mininterval=log_interval, ncols=80,
        dynamic_ncols=False, leave=True, **options,
    )
