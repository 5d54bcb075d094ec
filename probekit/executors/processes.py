"""Local multi-process backend of the executor seam: ``get_executor("processes", workers=16)``.

Runs the tasks ``fn(item)`` in a :class:`concurrent.futures.ProcessPoolExecutor` on this machine:
independent tasks on a many-core box without a cluster service. Results come back in input
order; an exception raised by a task re-raises in the driver with its own type and message plus
the note :class:`probekit.executor.InProcessExecutor` and the Ray backend add (task index,
function, item), chained to the worker's traceback; the tasks not yet started are cancelled.

Workers start with ``spawn`` by default (``fork`` after torch has started its thread pools can
deadlock), so ``fn`` must be an importable module-level function and each item picklable
(checked before any worker starts). Each worker limits torch to ``threads_per_worker`` intra-op
threads (``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` set in the pool initializer, then
``torch.set_num_threads``), so ``workers x threads_per_worker`` should not exceed the cores;
when the driver's progress is off (``--quiet``), the tasks' own progress bars are off too.

Workers import the driver's plug-in modules (:func:`probekit.executor.worker_imports`) in the
pool initializer, before any task is unpickled. They do not re-run the driver's ``__main__``
script (what ``spawn`` does by default, and why a script that starts a pool without an ``if
__name__ == "__main__":`` guard fails with ``BrokenProcessPool``) unless a task needs it: when no
pickled function or item refers to ``__main__``, the workers start with the main module's
``__file__``/``__spec__`` hidden from :mod:`multiprocessing` (restored once they have started).

The pool is created inside :meth:`ProcessExecutor.map` (nothing starts when this module is
imported or the executor built) and shut down when the map returns.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from ..errors import ConfigError
from ..executor import (
    CliAlias,
    WorkerImport,
    ensure_picklable,
    import_worker_modules,
    register_executor,
    task_note,
    worker_imports,
)
from ..progress import ENV_VAR as PROGRESS_ENV_VAR
from ..progress import progress_bar, progress_enabled
from ..util.constraints import Ge, OneOf, Validated

__all__ = ["START_METHODS", "ProcessExecutor"]

#: the ``multiprocessing`` start methods accepted as ``start_method``
START_METHODS = ("spawn", "forkserver", "fork")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _init_worker(threads: int, quiet: bool, imports: tuple[WorkerImport, ...] = ()) -> None:
    """Pool initializer: limit this worker's math libraries (and torch, if present) to ``threads``.

    ``quiet``: the driver's progress is off (``--quiet``, a ``progress_settings(enabled=False)``
    scope, which a spawned process does not inherit), so the tasks' own bars are silenced too.
    ``imports``: the driver's plug-in modules (:func:`probekit.executor.worker_imports`),
    imported before any task is unpickled here.
    """
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)
    if quiet:
        os.environ[PROGRESS_ENV_VAR] = "0"
    try:
        import torch
    except ImportError:  # tasks that do not use torch
        pass
    else:
        torch.set_num_threads(threads)
    import_worker_modules(imports)


def _refers_to_main(fn: Callable[[Any], Any], items: list[Any], desc: str | None) -> bool:
    """Whether ``fn`` or an item pickles a reference to ``__main__`` (each pickled once).

    Raises:
        ConfigError: ``fn`` or an item cannot be pickled (:func:`probekit.executor.ensure_picklable`).
    """
    found = False
    for index, item in enumerate(items):
        for obj in ((fn, item) if index == 0 else (item,)):
            try:
                data = pickle.dumps(obj)
            except Exception:  # the one-line error naming the task
                ensure_picklable(fn, item, index, desc)
                raise
            found = found or b"__main__" in data
    return found


@contextlib.contextmanager
def _main_hidden(hide: bool) -> Iterator[None]:
    """While workers start: ``__main__`` without ``__file__``/``__spec__``, so ``spawn`` does not re-run it."""
    main = sys.modules.get("__main__")
    if not hide or main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _default_workers() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True)
class ProcessExecutor(Validated):
    """Run independent tasks in a pool of local worker processes.

    Attributes:
        workers: worker processes (default: ``os.cpu_count()``); a map starts
            ``min(workers, len(items))`` of them.
        threads_per_worker: torch/OpenMP/MKL threads in each worker (1: one task per core).
        start_method: ``"spawn"`` (default; safe with torch), ``"forkserver"`` or ``"fork"``
            (fast start, unsafe once the driver has used torch threads).
        progress: bar over finished tasks (:mod:`probekit.progress`); ``True`` from the first
            task, ``False`` never, ``None`` once the map has run for a second.
    """

    workers: Annotated[int, Ge(1, hint="e.g. --executor-opt workers=4")] = field(
        default_factory=_default_workers)
    threads_per_worker: Annotated[int, Ge(1, hint="e.g. --executor-opt threads_per_worker=1")] = 1
    start_method: Annotated[str, OneOf(START_METHODS, hint="spawn is safe with torch")] = "spawn"
    progress: bool | None = None
    #: the options come from JSON (``--executor-opt``) and TOML: ``workers = 2.0`` is refused
    check_types: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """The declared rules, then the start method on this platform (no process starts here)."""
        super().__post_init__()
        import multiprocessing

        if self.start_method not in multiprocessing.get_all_start_methods():
            raise ConfigError(f"ProcessExecutor start_method={self.start_method!r} is not "
                              f"available on this platform; use one of "
                              f"{multiprocessing.get_all_start_methods()}")

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], *, desc: str | None = None
    ) -> list[Any]:
        """``[fn(item) for item in items]`` in worker processes; order preserved.

        Raises:
            ConfigError: ``fn`` or an item cannot be pickled (before any worker starts).
            Exception: the first failing task's own exception (type and message kept) with a
                note naming the task index, function and item; its ``__cause__`` holds the
                worker's traceback. A worker that died raises ``BrokenProcessPool`` so noted.
        """
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        items = list(items)
        if not items:
            return []
        needs_main = _refers_to_main(fn, items, desc)
        results: list[Any] = [None] * len(items)
        pool = ProcessPoolExecutor(
            max_workers=min(self.workers, len(items)),
            mp_context=multiprocessing.get_context(self.start_method),
            initializer=_init_worker,
            initargs=(self.threads_per_worker, not progress_enabled(self.progress),
                      worker_imports()),
        )
        try:
            with _main_hidden(not needs_main):  # the first submit starts the workers
                futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
            pending = set(futures)
            with progress_bar(total=len(items), desc=desc or "tasks", unit="task",
                              enabled=self.progress, leave=False,
                              delay=0 if self.progress else None) as bar:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in sorted(done, key=futures.__getitem__):
                        i = futures[fut]
                        try:
                            results[i] = fut.result()
                        except Exception as err:
                            for other in pending:
                                other.cancel()
                            err.add_note(task_note(fn, i, items[i], desc))
                            raise
                        bar.update(1)
        finally:
            # queued tasks are dropped; running ones finish (a worker cannot be interrupted)
            pool.shutdown(wait=True, cancel_futures=True)
        return results

    def map_each_node(self, fn: Callable[[Any], Any], item: Any) -> list[Any]:
        """``[fn(item)]`` run here: the workers share this machine (its paths, its user).

        :func:`probekit.executor.check_worker_paths` uses it, so a path check starts no pool.
        """
        return [fn(item)]


# the options are ProcessExecutor's fields, validated by its __post_init__ (no process starts)
register_executor("processes", ProcessExecutor, options=ProcessExecutor, aliases=(CliAlias(
    flag="--workers", option="workers", metavar="N", parse=int,
    help="worker processes of the local 'processes' executor (default: all cores)",
),))
