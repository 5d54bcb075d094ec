"""One seam for independent tasks: ``executor.map(fn, items)``.

Every loop over independent work (per probe of a suite, per site of a permutation test, per
seed of a benchmark, per layer batch ...) goes through an :class:`Executor`, so a scale-out
backend (Ray) can run the same tasks elsewhere without touching the callers.

A task is ``fn(item)`` where ``fn`` is a plain importable (module-level) function and ``item``
a picklable value, usually a frozen dataclass spec plus its data. No closures, no lambdas, no
shared mutable state: results come back only through the return value, in the order of
``items``.

The default :class:`InProcessExecutor` runs the tasks one after another in this process with a
tqdm progress bar. Other backends register a factory under a name::

    register_executor("ray", make_ray_executor)   # done by probekit.executors.ray
    get_executor("ray", address="auto").map(fit_one, specs, desc="probes")

``get_executor("ray")`` imports :mod:`probekit.executors.ray` on first use.

This module never imports Ray (or any backend); backends import it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from .errors import ConfigError

__all__ = [
    "Executor",
    "InProcessExecutor",
    "PathCheck",
    "add_executor_arguments",
    "available_executors",
    "check_worker_paths",
    "executor_from_args",
    "get_executor",
    "map_resumable",
    "register_executor",
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
        progress: ``True`` always shows a tqdm bar, ``False`` never, ``None`` (default) shows
            it only when stderr is a terminal (tqdm's ``disable=None``).
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
        from tqdm.auto import tqdm

        items = list(items)
        disable = None if self.progress is None else not self.progress
        results: list[Any] = []
        bar = tqdm(items, desc=desc, unit="task", disable=disable, leave=False)
        for index, item in enumerate(bar):
            if self.check_picklable:
                _check_picklable(fn, item, index, desc)
            try:
                results.append(fn(item))
            except Exception as err:
                err.add_note(task_note(fn, index, item, desc))
                raise
        return results


def _check_picklable(fn: Callable[..., Any], item: object, index: int, desc: str | None) -> None:
    for what, obj in (("function", fn), ("item", item)):
        try:
            pickle.dumps(obj)
        except Exception as err:  # pickle raises PicklingError, AttributeError, TypeError ...
            raise ConfigError(
                f"{task_note(fn, index, item, desc)}: its {what} cannot be pickled ({err}); "
                "use a module-level function of a frozen, picklable spec"
            ) from None


_FACTORIES: dict[str, Callable[..., Executor]] = {"inprocess": InProcessExecutor}

# Backends shipped with probekit, imported on first use (their modules call register_executor).
# Importing them never imports the backend library itself (ray is imported when a task runs).
_LAZY_BACKENDS: dict[str, str] = {"ray": "probekit.executors.ray"}


def register_executor(name: str, factory: Callable[..., Executor]) -> None:
    """Make ``get_executor(name, **options)`` return ``factory(**options)``.

    Backends call this when imported (e.g. ``probekit.executors.ray``); re-registering a name
    replaces it.
    """
    if not name or not name.isidentifier():
        raise ConfigError(f"executor name {name!r} must be a non-empty identifier, e.g. 'ray'")
    _FACTORIES[name] = factory


def available_executors() -> list[str]:
    """Names accepted by :func:`get_executor` (lazily imported backends included)."""
    return sorted(set(_FACTORIES) | set(_LAZY_BACKENDS))


def get_executor(spec: object = None, **options: Any) -> Executor:
    """Resolve an executor spec (a name, an :class:`Executor` or None) to an executor.

    ``None`` -> in-process, a name -> its registered factory (``"ray"`` imports
    :mod:`probekit.executors.ray` on first use), an :class:`Executor` instance ->
    itself (``options`` are then not allowed). ``spec`` is typed ``object`` because it comes from
    suite files and CLI options too: anything else is refused here, with a message.

    Raises:
        ConfigError: unknown name (the message lists the valid names) or an object that is
            neither a name nor an executor.
    """
    if spec is None:
        spec = "inprocess"
    if isinstance(spec, str):
        if spec not in _FACTORIES and spec in _LAZY_BACKENDS:
            import importlib

            importlib.import_module(_LAZY_BACKENDS[spec])  # registers the factory
        if spec not in _FACTORIES:
            raise ConfigError(
                f"unknown executor {spec!r}; valid executors are {available_executors()} "
                "(for a Ray cluster: `ray start --head`, then executor 'ray' with address "
                "'auto' or HOST:6379)"
            )
        return _FACTORIES[spec](**options)
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


def add_executor_arguments(parser: Any) -> None:
    """Add ``--executor`` and ``--ray-address`` to an argparse parser (CLI commands that fan out)."""
    parser.add_argument(
        "--executor", default=None,
        help="runs the independent tasks: inprocess (default) or ray",
    )
    parser.add_argument(
        "--ray-address", default=None, metavar="auto|HOST:PORT",
        help="Ray cluster to join (implies --executor ray): 'auto' on a node of a cluster started "
        "with `ray start --head`, or the head's HOST:6379; unset: a local cluster in this process",
    )


def executor_from_args(
    executor: str | None, ray_address: str | None, *, progress: bool | None = None
) -> Executor | None:
    """The executor of ``--executor`` / ``--ray-address`` (None when neither is given), connected.

    A Ray executor connects here (``connect()``), so an unreachable cluster fails before any
    model loads.

    Raises:
        ConfigError: an unknown executor, or ``--ray-address`` with another executor.
    """
    if executor is None and ray_address is None:
        return None
    name = executor or ("ray" if ray_address is not None else "inprocess")
    if ray_address is not None and name != "ray":
        raise ConfigError(
            f"--ray-address {ray_address!r} given with --executor {name!r}; use --executor ray "
            "(or drop --ray-address)"
        )
    options: dict[str, Any] = {"progress": progress}
    if ray_address is not None:
        options["address"] = ray_address
    out = get_executor(name, **options)
    connect = getattr(out, "connect", None)
    if connect is not None:
        connect()
    return out


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

    Runs :func:`probe_paths` on every node when the executor can (``map_each_node``, e.g. Ray),
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
            "cluster volume) at the same mount point, or run without --executor ray"
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


def run_recorded(fn: Callable[[Any], Any], directory: str, keyed: tuple[str, Any]) -> Any:
    """On a worker: ``fn(item)``, its result then pickled atomically to ``directory/task-KEY.pkl``."""
    from .util.io import atomic_write_bytes

    key, item = keyed
    result = fn(item)
    atomic_write_bytes(os.path.join(directory, f"task-{key}.pkl"), pickle.dumps(result, protocol=5))
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
                with open(path, "rb") as fh:
                    results[i] = pickle.load(fh)
            except Exception:  # a damaged or unreadable record: run the task again
                pass
    todo = [i for i in range(len(items)) if i not in results]
    if todo:
        check_worker_paths(executor, write=[root])
        out = executor.map(partial(run_recorded, fn, root), [(keys[i], items[i]) for i in todo],
                           desc=desc)
        results.update(zip(todo, out))
    return [results[i] for i in range(len(items))]
