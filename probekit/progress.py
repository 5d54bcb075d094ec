"""Progress output for every long phase, suited to notebooks, terminals and log files.

One seam: :func:`progress_bar` (a bar you update) and :func:`track` (wrap the loop's iterable).
Bars are ``tqdm.auto`` bars: in a Jupyter kernel an ipywidgets progress bar (the ``notebook``
extra installs ipywidgets), on a terminal a plain ``tqdm`` bar. When stderr is not a TTY (CI logs,
``nohup``, a pipe) progress is written as plain lines, without carriage returns or ANSI escape
codes, at most every ``log_interval`` seconds plus a final line, so a log stays readable::

    probe sweep: 12/40 cells (30%), 8.1 s elapsed, 00:19 left

Progress counts examples or cells (a probe per site x layer, a patched position x layer, a
permutation refit, a claim), never batches, and always goes to stderr: stdout stays clean for
JSON. A phase that ends within ``delay`` seconds prints nothing.

A step that reports no count (a library call: a GGUF dequantised by ``transformers``) gets a
:func:`heartbeat` instead: a line when each of its phases starts and one every ``interval``
seconds while it runs (``converting gemma3-270m from its GGUF: dequantising the weights, 120 s
elapsed``), then ``done``.

Switches (an off anywhere wins): the environment variable ``PROBEKIT_PROGRESS=0``; a
:func:`progress_settings` scope (the CLIs' ``--quiet``, ``run_suite(progress=False)``); an
``enabled=False`` / ``progress=False`` argument of the call.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from tqdm.auto import tqdm

__all__ = [
    "ProgressSettings",
    "heartbeat",
    "in_notebook",
    "progress_bar",
    "progress_enabled",
    "progress_settings",
    "track",
]

T = TypeVar("T")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

#: Environment switch: ``0`` (or ``false``/``no``/``off``) hides all progress output.
ENV_VAR = "PROBEKIT_PROGRESS"


@dataclass(frozen=True, kw_only=True)
class ProgressSettings:
    """Defaults of every bar opened in a :func:`progress_settings` scope.

    Attributes:
        enabled: False hides every bar in the scope.
        log_interval: seconds between plain lines when stderr is not a TTY (nor a notebook).
        delay: a phase that ends within this many seconds shows nothing (0: always shows).
    """

    enabled: bool = True
    log_interval: float | int = 10.0
    delay: float | int = 1.0

    def __post_init__(self) -> None:
        for name in ("log_interval", "delay"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"ProgressSettings.{name} = {value!r}: use seconds >= 0")


_DEFAULT = ProgressSettings()
_SETTINGS: contextvars.ContextVar[ProgressSettings | None] = contextvars.ContextVar(
    "probekit_progress", default=None
)


def _current() -> ProgressSettings:
    return _SETTINGS.get() or _DEFAULT


@contextlib.contextmanager
def progress_settings(
    *, enabled: bool | None = None, log_interval: float | int | None = None,
    delay: float | int | None = None,
) -> Iterator[ProgressSettings]:
    """Scope overriding the progress defaults (``None`` keeps the outer value); restored on exit.

    ``enabled=False`` silences every bar opened inside, however deep (a ``--quiet`` run);
    ``enabled=True`` does not re-enable bars an outer scope or ``PROBEKIT_PROGRESS=0`` turned off.
    """
    outer = _current()
    changes = {k: v for k, v in (("log_interval", log_interval), ("delay", delay)) if v is not None}
    settings = replace(outer, enabled=outer.enabled and enabled is not False, **changes)
    token = _SETTINGS.set(settings)
    try:
        yield settings
    finally:
        _SETTINGS.reset(token)


def progress_enabled(enabled: bool | None = None) -> bool:
    """Whether a bar with argument ``enabled`` shows: no switch (env, scope, argument) is off."""
    env = os.environ.get(ENV_VAR, "").strip().lower()
    return env not in ("0", "false", "no", "off") and _current().enabled and enabled is not False


def in_notebook() -> bool:
    """Whether ``tqdm.auto`` chose its notebook (widget) bar: this process is a Jupyter kernel."""
    return any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__)


@runtime_checkable
class _TextSink(Protocol):
    """What :class:`_LineWriter` writes to: ``sys.stderr``, a log file, pytest's capture."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


#: the timing tail of a plain line (:func:`_line_format`): ", 1.2 s elapsed[, 00:03 left]"
_TIMES = re.compile(r", [0-9.]+ s elapsed.*$")


class _LineWriter:
    r"""A file-like sink turning tqdm's ``\r`` redraws into newline-terminated log lines.

    Lines written within ``delay`` seconds of its creation are dropped: a phase that ends that
    fast leaves no line, a longer one prints its final count even when it took less than
    ``log_interval``.
    """

    def __init__(self, stream: _TextSink, delay: float | int = 0.0) -> None:
        self.stream = stream
        self.last = ""
        self.delay = delay
        self.start = time.monotonic()

    def write(self, text: str) -> int:
        if self.delay and time.monotonic() - self.start < self.delay:
            return len(text)
        line = _ANSI.sub("", text).replace("\r", "").strip()
        key = _TIMES.sub("", line)  # a redraw that only moved the clock (tqdm's close) is no news
        if line and key != self.last:
            self.stream.write(line + "\n")
            self.last = key
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _plural(unit: str) -> str:
    return unit if unit.endswith("s") else unit + ("es" if unit.endswith(("x", "ch", "sh")) else "s")


def _line_format(unit: str, total: int | None) -> str:
    """The plain-line format: ``desc: n/total units (p%), t s elapsed, eta left``."""
    units = _plural(unit)
    if total is None:
        return "{desc}: {n_fmt} " + units + ", {elapsed_s:.1f} s elapsed"
    return ("{desc}: {n_fmt}/{total_fmt} " + units
            + " ({percentage:.0f}%), {elapsed_s:.1f} s elapsed, {remaining} left")


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    enabled: bool | None = True,
    initial: int = 0,
    leave: bool | None = None,
    log_interval: float | int | None = None,
    delay: float | int | None = None,
) -> tqdm:
    """A ``tqdm.auto`` bar over ``iterable`` (or a manual bar).

    A widget in a notebook, a live bar on a TTY, plain log lines on stderr otherwise.

    Args:
        iterable: what to iterate (None for a manual bar updated with ``.update(n)``).
        desc: the phase shown before the bar, e.g. ``"capture"``.
        total: number of items, when ``iterable`` has no ``len``.
        unit: what one item is, singular (``"example"``, ``"cell"``, ``"step"``...).
        enabled: False hides the bar (``--quiet``/``progress=False``); see :func:`progress_enabled`.
        initial: items already done (a resumed run, cells that need no work).
        leave: keep the finished bar on screen (``None``: only an outermost bar, so nested
            bars do not pile up; plain lines are always kept).
        log_interval: seconds between plain lines (``None``: the scope's, 10 s by default).
        delay: show nothing for a phase that ends within this many seconds (``None``: the scope's,
            1 s by default).
    """
    settings = _current()
    stream = sys.stderr
    is_tty = bool(getattr(stream, "isatty", lambda: False)())
    delay = settings.delay if delay is None else delay
    options: dict[str, Any] = {
        "desc": desc, "total": total, "unit": unit, "disable": not progress_enabled(enabled),
        "initial": initial,
    }
    if is_tty or in_notebook():
        return tqdm(iterable, leave=leave, delay=delay, **options)
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
        options["total"] = total
    return tqdm(
        iterable, file=_LineWriter(stream, delay), ascii=True, ncols=80, dynamic_ncols=False, leave=True,
        miniters=1,  # rate-limited by time only: tqdm's adaptive miniters would skip weighted updates
        mininterval=settings.log_interval if log_interval is None else log_interval,
        bar_format=_line_format(unit, total), **options,
    )


def track(
    iterable: Iterable[T],
    *,
    desc: str,
    unit: str,
    total: int | None = None,
    weight: Callable[[T], int] | None = None,
    initial: int = 0,
    enabled: bool | None = True,
) -> Iterator[T]:
    """Yield ``iterable``'s items, counting each one done when the loop asks for the next.

    ``weight(item)`` is how many units an item is (a batch of pairs counts its pairs, a group of
    probes its cells); ``total`` is then the sum of the weights (plus ``initial``). A loop body
    is wrapped with a one-line change::

        for ids in track(groups.values(), desc="probe sweep", unit="cell", total=R, weight=len):

    Args:
        iterable: the loop's items.
        desc: the phase (``"probe sweep"``).
        unit: what one counted unit is, singular (``"cell"``, ``"example"``, ``"refit"``).
        total: units in all (default ``len(iterable)`` when it has one and ``weight`` is None).
        weight: units per item (default 1).
        initial: units done before the loop (cells needing no work).
        enabled: as in :func:`progress_bar`.
    """
    if total is None and weight is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    bar = progress_bar(desc=desc, total=total, unit=unit, initial=initial, enabled=enabled)
    with contextlib.closing(bar):
        for item in iterable:
            yield item
            bar.update(1 if weight is None else weight(item))


@contextlib.contextmanager
def heartbeat(desc: str, *, interval: float | int = 30.0, delay: float | int = 0.0,
              enabled: bool | None = None, stream: Any = None) -> Iterator[Callable[[str], None]]:
    """Yield ``phase(name)``: announce a phase; a background line every ``interval`` seconds.

    For a step whose library call reports no count; the lines go to stderr whatever it is (a
    terminal or a log), one per phase and one per ``interval``, and follow the progress
    switches (:func:`progress_enabled`).

    Args:
        desc: what runs (``"converting smollm2-135m from its GGUF (once)"``).
        interval: seconds between lines while one phase runs (> 0).
        delay: nothing is printed before this many seconds have passed.
        enabled: ``False`` prints nothing (as ``--quiet``).
        stream: where lines go (default ``sys.stderr``).
    """
    if not interval > 0:
        raise ValueError(f"heartbeat interval = {interval!r}: use seconds > 0")
    out = sys.stderr if stream is None else stream
    on = progress_enabled(enabled)
    start = time.monotonic()
    state = {"phase": "starting", "printed": False}
    lock = threading.Lock()
    stop = threading.Event()

    def emit(text: str) -> None:
        if not on or time.monotonic() - start < delay:
            return
        with lock:
            out.write(f"{desc}: {text}, {time.monotonic() - start:.0f} s elapsed\n")
            out.flush()
            state["printed"] = True

    def phase(name: str) -> None:
        state["phase"] = name
        emit(name)

    def beat() -> None:
        while not stop.wait(interval):
            emit(str(state["phase"]))

    thread = threading.Thread(target=beat, name="probekit-heartbeat", daemon=True)
    thread.start()
    try:
        yield phase
    finally:
        stop.set()
        thread.join()
    if state["printed"]:
        emit("done")
