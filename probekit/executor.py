"""One seam for independent tasks: ``executor.map(fn, items)``.

Every loop over independent work (per probe of a suite, per site of a permutation test, per
seed of a benchmark, per layer batch ...) goes through an :class:`Executor`, so a scale-out
backend (a cluster) can run the same tasks elsewhere without touching the callers.

A task is ``fn(item)`` where ``fn`` is a plain importable (module-level) function and ``item``
a picklable value, usually a frozen dataclass spec plus its data. No closures, no lambdas, no
shared mutable state: results come back only through the return value, in the order of
``items``.

The default :class:`InProcessExecutor` runs the tasks one after another in this process with a
tqdm progress bar. Other backends register a factory under a name, with the dataclass of their
options (its fields are the options, its ``__post_init__`` validates them, without connecting
anywhere) and optional CLI aliases of those options::

    register_executor("mybackend", make_my_executor, options=MyOptions,
                      aliases=(CliAlias(flag="--my-host", option="host", help="..."),))
    get_executor("mybackend", host="node1").map(fit_one, specs, desc="probes")

Suites choose a backend by name with its options (``[execution] executor = NAME`` and an
``[execution.options]`` table), commands with ``--executor NAME --executor-opt KEY=VALUE``
(:func:`probekit.executor_cli.add_executor_arguments`); both are validated by the backend's options class before any
model loads. The modules of :mod:`probekit.executors` (the shipped backends) are imported on the
first lookup, so a new backend is one module there and no edit elsewhere.

Plug-in modules of the user's own code (a measurement kind named by a claim file's
``[plugins]``) are not importable by name in a fresh worker process: the driver declares them
with :func:`add_worker_import` (module name and folder) and every backend imports
:func:`worker_imports` in each worker before its first task (:func:`import_worker_modules`),
so a task's spec of a plug-in class unpickles there and its kind is registered, with no
``if __name__ == "__main__"`` guard in the user's code.

This module names no backend and never imports one; backends import it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from .errors import ConfigError
from .progress import progress_bar
from .util.registry import Registry

__all__ = [
    "EXECUTORS",
    "Backend",
    "CliAlias",
    "Executor",
    "InProcessExecutor",
    "PathCheck",
    "WorkerImport",
    "add_worker_import",
    "ensure_picklable",
    "available_executors",
    "check_worker_paths",
    "executor_option_names",
    "executor_options",
    "get_executor",
    "import_worker_modules",
    "make_executor",
    "map_resumable",
    "register_executor",
    "worker_imports",
]

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Executor(Protocol):
    """Runs independent tasks ``fn(item)`` and returns their results in input order."""

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], *, desc: str | None = None
    ) -> list[Any]:
        """``[fn(item) for item in items]``, possibly in parallel; ``desc`` labels progress."""
        ...


def describe_item(item: object, limit: int = 200) -> str:
    """Short ``repr`` of a task item for error notes (truncated to ``limit`` characters)."""
    text = repr(item)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def task_note(fn: Callable[..., Any], index: int, item: object, desc: str | None) -> str:
    """The note added to an exception raised by a task: which function, which item."""
    where = f" of {desc!r}" if desc else ""
    name = getattr(fn, "__qualname__", repr(fn))
    return f"executor task {index}{where} failed: {name}({describe_item(item)})"


@dataclass(frozen=True, kw_only=True)
class InProcessExecutor:
    """Run tasks sequentially in this process (the default executor).

    Attributes:
        progress: ``True`` always shows a bar (from the first task), ``False`` never,
            ``None`` (default) shows it once the map has run for a second
            (:mod:`probekit.progress`: a bar on a terminal, log lines otherwise).
        check_picklable: pickle every ``fn`` and item before running it, so a task that a
            multi-process backend could not ship fails here too (tests turn it on).

    An exception raised by a task propagates unchanged (same type and message) with a note
    naming the task index, the function and the item (``BaseException.add_note``).
    """

    progress: bool | None = None
    check_picklable: bool = False

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], *, desc: str | None = None
    ) -> list[Any]:
        """``[fn(item) for item in items]`` with a progress bar; order preserved."""
        items = list(items)
        results: list[Any] = []
        bar = progress_bar(items, desc=desc or "tasks", unit="task", enabled=self.progress,
                           leave=False, delay=0 if self.progress else None)
        for index, item in enumerate(bar):
            if self.check_picklable:
                ensure_picklable(fn, item, index, desc)
            try:
                results.append(fn(item))
            except Exception as err:
                err.add_note(task_note(fn, index, item, desc))
                raise
        return results


def ensure_picklable(fn: Callable[..., Any], item: object, index: int, desc: str | None) -> None:
    """Raise ConfigError naming task ``index`` if ``fn`` or ``item`` cannot be pickled.

    Backends that ship tasks to other processes call it before starting any, so a closure or
    an unpicklable item fails at once with the fix instead of deep inside a worker.
    """
    for what, obj in (("function", fn), ("item", item)):
        try:
            pickle.dumps(obj)
        except Exception as err:  # pickle raises PicklingError, AttributeError, TypeError ...
            raise ConfigError(
                f"{task_note(fn, index, item, desc)}: its {what} cannot be pickled ({err}); "
                "use a module-level function of a frozen, picklable spec"
            ) from None


@dataclass(frozen=True)
class WorkerImport:
    """A module every worker imports before its first task (a plug-in of the user's code).

    Attributes:
        module: the module name.
        folder: the folder it is imported from (put at the front of the worker's ``sys.path``);
            ``None``: importable from the worker's own ``sys.path`` (an installed package).
    """

    module: str
    folder: str | None = None


_WORKER_IMPORTS: dict[str, WorkerImport] = {}


def add_worker_import(module: str, folder: str | None = None) -> None:
    """Declare a module every backend's workers import before running a task (idempotent).

    Call it in the driver once the module is imported there (a plug-in loader does): tasks
    started afterwards by any executor can then unpickle the module's classes and find what
    it registered.
    """
    _WORKER_IMPORTS[module] = WorkerImport(module=module, folder=folder)


def worker_imports() -> tuple[WorkerImport, ...]:
    """The modules declared by :func:`add_worker_import`, in declaration order."""
    return tuple(_WORKER_IMPORTS.values())


def import_worker_modules(imports: Sequence[WorkerImport]) -> None:
    """On a worker: put each folder on ``sys.path`` and import each module (once)."""
    import importlib

    for imp in imports:
        if imp.folder is not None and imp.folder not in sys.path:
            sys.path.insert(0, imp.folder)
        if imp.module not in sys.modules:
            importlib.import_module(imp.module)


@dataclass(frozen=True, kw_only=True)
class CliAlias:
    """A command-line shortcut for one option of a backend.

    ``FLAG VALUE`` means ``--executor BACKEND --executor-opt OPTION=VALUE``.

    Attributes:
        flag: the option string, e.g. ``"--my-host"``.
        option: the backend option it sets (a field of the backend's options class).
        help: the ``--help`` line.
        metavar: shown for the value in ``--help``.
        parse: converts the command-line string to the option's value (e.g. ``int``; argparse
            reports a value it refuses); ``None`` keeps the string.
    """

    flag: str
    option: str
    help: str
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None

    @property
    def dest(self) -> str:
        """The argparse attribute holding the value (``--my-host`` -> ``my_host``)."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True, kw_only=True)
class Backend:
    """A registered executor backend.

    Attributes:
        factory: builds the executor from keyword options.
        options: the dataclass of its options (fields = option names, construction validates
            them), or None (options passed to ``factory`` unchecked).
        aliases: command-line shortcuts of single options.
    """

    factory: Callable[..., Executor]
    options: type | None = None
    aliases: tuple[CliAlias, ...] = ()


#: The executor backends by name. Every module of :mod:`probekit.executors` is imported on the
#: first lookup (by package name, not by a static import: the backends sit above everything in
#: the layers and nothing imports them, ``pyproject.toml`` import contracts).
EXECUTORS: Registry[Backend] = Registry(
    "executor", plugins=f"{__package__}.executors",
    hint="a backend module in probekit.executors calls register_executor(name, factory)",
)


def register_executor(
    name: str, factory: Callable[..., Executor], *, options: type | None = None,
    aliases: Sequence[CliAlias] = (),
) -> None:
    """Make ``get_executor(name, **options)`` return ``factory(**options)``.

    Backends call this when imported (the modules of :mod:`probekit.executors` are imported on
    the first lookup). A name registered twice from a different factory is refused (a
    :class:`ConfigError` naming both), as in every registry (:class:`~probekit.util.registry.Registry`).

    Args:
        name: the executor's name (``[execution] executor``, ``--executor``).
        factory: builds the executor from keyword options.
        options: a dataclass whose fields are the backend's options and whose construction
            validates them (raising :class:`~probekit.errors.ConfigError` or ``ValueError``);
            suite tables and ``--executor-opt`` are checked against it before anything runs.
            ``None``: options are passed to ``factory`` unchecked.
        aliases: command-line shortcuts of single options (:class:`CliAlias`).
    """
    if not name or not name.isidentifier():
        raise ConfigError(f"executor name {name!r} must be a non-empty identifier, e.g. 'inprocess'")
    if options is not None and not dataclasses.is_dataclass(options):
        raise ConfigError(f"register_executor({name!r}): options must be a dataclass, got {options!r}")
    fields = {f.name for f in dataclasses.fields(options)} if options is not None else set()
    for alias in aliases:
        if options is not None and alias.option not in fields:
            raise ConfigError(f"register_executor({name!r}): alias {alias.flag} sets "
                              f"{alias.option!r}, which is not an option of {options.__name__}")
    EXECUTORS.register(name, Backend(factory=factory, options=options, aliases=tuple(aliases)),
                       origin=factory)


register_executor("inprocess", InProcessExecutor, options=InProcessExecutor)


def available_executors() -> list[str]:
    """Names accepted by :func:`get_executor` (the backends of :mod:`probekit.executors` included)."""
    return list(EXECUTORS.names())


def executor_option_names(name: str) -> list[str] | None:
    """The options backend ``name`` takes (``None``: registered without an options class)."""
    cls = EXECUTORS.get(name).options
    return None if cls is None else sorted(f.name for f in dataclasses.fields(cls))


def executor_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``options`` against backend ``name``'s options class; returns them as a dict.

    Raises:
        ConfigError: an unknown executor, an option the backend does not have (the message
            lists its options), or a value its options class refuses.
    """
    valid = executor_option_names(name)
    if valid is None:
        return dict(options)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"executor {name!r} has no option {unknown[0]!r}; its options are {valid}")
    try:
        EXECUTORS.get(name).options(**options)  # type: ignore[misc]
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"executor {name!r} options {dict(options)}: {err}") from None
    return dict(options)


def make_executor(
    name: str, options: Mapping[str, Any] | None = None, *, progress: bool | None = None
) -> Executor:
    """``get_executor(name, **options)`` with the options validated (no connection is made).

    ``progress`` is passed when the backend has that option and ``options`` does not set it.
    """
    opts = executor_options(name, options or {})
    cls = EXECUTORS.get(name).options
    if cls is not None and "progress" in {f.name for f in dataclasses.fields(cls)}:
        opts.setdefault("progress", progress)
    return get_executor(name, **opts)


def get_executor(spec: object = None, **options: Any) -> Executor:
    """Resolve an executor spec (a name, an :class:`Executor` or None) to an executor.

    ``None`` -> in-process, a name -> its registered factory (the modules of
    :mod:`probekit.executors` register theirs on the first lookup), an :class:`Executor`
    instance -> itself (``options`` are then not allowed). ``spec`` is typed ``object`` because
    it comes from suite files and CLI options too: anything else is refused here, with a message.

    Raises:
        ConfigError: unknown name (the message lists the valid names) or an object that is
            neither a name nor an executor.
    """
    if spec is None:
        spec = "inprocess"
    if isinstance(spec, str):
        return EXECUTORS.get(spec).factory(**options)
    if isinstance(spec, Executor):
        if options:
            raise ConfigError(
                f"executor options {sorted(options)} given with an executor instance {spec!r}; "
                "configure the instance instead"
            )
        return spec
    raise ConfigError(
        f"executor must be a name in {available_executors()} or an object with "
        f".map(fn, items, desc=...), got {type(spec).__name__}"
    )


@dataclass(frozen=True, kw_only=True)
class PathCheck:
    """Paths every worker must see: ``read`` must exist, ``write`` must be writable directories."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


def probe_paths(check: PathCheck) -> list[tuple[str, str, str]]:
    """On a worker: ``(host, path, problem)`` for each path of ``check`` it cannot use."""
    import os
    import socket
    import uuid
    from pathlib import Path

    host = socket.gethostname()
    out = [(host, p, "does not exist there") for p in check.read if not os.path.exists(p)]
    for p in check.write:
        probe = Path(p) / f".probekit-write-check-{uuid.uuid4().hex}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            out.append((host, p, f"is not writable there ({err.strerror or err})"))
    return out


def check_worker_paths(
    executor: Executor, *, read: Iterable[Any] = (), write: Iterable[Any] = ()
) -> None:
    """Check, before any work, that the executor's workers see the paths the tasks will use.

    Runs :func:`probe_paths` on every node when the executor can (``map_each_node``),
    else as one task. ``read`` paths must exist, ``write`` paths must be writable directories.

    Raises:
        ConfigError: one line naming the first path a worker cannot use, its host, and the fix.
    """
    check = PathCheck(read=tuple(str(p) for p in read), write=tuple(str(p) for p in write))
    if isinstance(executor, InProcessExecutor) or not (check.read or check.write):
        return  # the driver is the worker: it has checked its own paths
    each_node = getattr(executor, "map_each_node", None)
    reports = each_node(probe_paths, check) if each_node else executor.map(probe_paths, [check])
    problems = [p for report in reports for p in report]
    if problems:
        host, path, problem = problems[0]
        more = f" ({len(problems) - 1} more problem(s) on other nodes/paths)" if len(problems) > 1 else ""
        raise ConfigError(
            f"path {path!r} {problem} on worker {host}{more}: every worker must see the stores and "
            "checkpoints at the same path; put them on a filesystem all nodes mount (NFS, a "
            "cluster volume) at the same mount point, or run with the in-process executor"
        )


def task_key(fn: Callable[..., Any], item: object) -> str:
    """A stable digest (24 hex digits) of ``(fn, item)``: a finished-task record's name.

    Content-based, so a restarted driver (another process) gets the same key for the same
    task: functions by module and qualified name; dataclasses, partials, tuples, lists and
    dicts by their parts; tensors and arrays by dtype, shape and bytes; anything else by its
    pickle (where that is not deterministic, a rerun only misses the record and runs the task
    again, never reuses another task's result).
    """
    digest = hashlib.sha256()
    _feed(digest, (fn, item))
    return digest.hexdigest()[:24]


def _feed(digest: Any, obj: object) -> None:
    """Feed a canonical encoding of ``obj`` into ``digest`` (see :func:`task_key`)."""
    import dataclasses
    import functools

    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, (tuple, list, set, frozenset)):
        seq = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        digest.update(f"{type(obj).__name__}[{len(seq)}](".encode())
        for x in seq:
            _feed(digest, x)
        digest.update(b")")
    elif isinstance(obj, dict):
        digest.update(f"dict[{len(obj)}](".encode())
        for k in sorted(obj, key=repr):
            _feed(digest, k)
            _feed(digest, obj[k])
        digest.update(b")")
    elif isinstance(obj, functools.partial):
        digest.update(b"partial(")
        _feed(digest, (obj.func, obj.args, obj.keywords))
        digest.update(b")")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        _feed(digest, type(obj))
        _feed(digest, {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    elif hasattr(obj, "__self__") and hasattr(obj, "__func__"):  # a bound method
        digest.update(b"method(")
        _feed(digest, (obj.__func__, obj.__self__))
        digest.update(b")")
    elif isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        digest.update(f"ref:{getattr(obj, '__module__', '?')}.{obj.__qualname__};".encode())
    elif type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
        import torch

        t = obj.detach().cpu().contiguous()
        digest.update(f"tensor:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif hasattr(obj, "__array_interface__") and hasattr(obj, "tobytes"):  # numpy arrays
        digest.update(f"array:{obj.dtype}:{obj.shape};".encode())
        digest.update(obj.tobytes() if obj.dtype.kind != "O" else pickle.dumps(obj, protocol=5))
    else:
        digest.update(pickle.dumps(obj, protocol=5))


_RECORD_MAGIC = b"probekit-task/1\n"


def _read_record(path: str) -> Any:
    """The result recorded at ``path``; raises ``ValueError`` for a damaged or foreign record.

    A record is ``magic + sha256(payload) + payload`` (the pickled result): a flipped byte or a
    truncated file fails the digest and is never unpickled.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    n = len(_RECORD_MAGIC)
    digest, payload = data[n:n + 32], data[n + 32:]
    if not data.startswith(_RECORD_MAGIC) or hashlib.sha256(payload).digest() != digest:
        raise ValueError(f"task record {path} fails its checksum")
    return pickle.loads(payload)


def run_recorded(fn: Callable[[Any], Any], directory: str, keyed: tuple[str, Any]) -> Any:
    """On a worker: ``fn(item)``, its result then recorded atomically in ``directory/task-KEY.pkl``."""
    from .util.io import atomic_write_bytes

    key, item = keyed
    result = fn(item)
    payload = pickle.dumps(result, protocol=5)
    atomic_write_bytes(os.path.join(directory, f"task-{key}.pkl"),
                       _RECORD_MAGIC + hashlib.sha256(payload).digest() + payload)
    return result


def map_resumable(
    executor: Executor,
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    directory: str | os.PathLike[str] | None,
    *,
    desc: str | None = None,
) -> list[Any]:
    """``executor.map(fn, items)`` that records each finished task, so a rerun skips it.

    Each task's result is written by the worker that ran it (``directory/task-KEY.pkl``,
    atomically; ``KEY`` = :func:`task_key`), so a driver killed mid-run loses only the tasks
    still running: the same call afterwards loads the recorded results and runs the rest.
    ``directory=None`` is plain ``executor.map``. Workers must be able to write ``directory``.
    Records are pickles: keep them in a directory of your own (never load untrusted ones).
    """
    items = list(items)
    if directory is None:
        return executor.map(fn, items, desc=desc)
    from functools import partial

    root = os.fspath(directory)
    os.makedirs(root, exist_ok=True)
    keys = [task_key(fn, item) for item in items]
    results: dict[int, Any] = {}
    for i, key in enumerate(keys):
        path = os.path.join(root, f"task-{key}.pkl")
        if os.path.exists(path):
            try:
                results[i] = _read_record(path)
            except Exception as err:  # a damaged or unreadable record: run the task again
                logging.getLogger("probekit").warning("%s: running that task again", err)
    todo = [i for i in range(len(items)) if i not in results]
    if todo:
        check_worker_paths(executor, write=[root])
        out = executor.map(partial(run_recorded, fn, root), [(keys[i], items[i]) for i in todo],
                           desc=desc)
        results.update(zip(todo, out))
    return [results[i] for i in range(len(items))]
