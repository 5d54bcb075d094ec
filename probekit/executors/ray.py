"""Ray backend of the executor seam: ``get_executor("ray", address=...).map(fn, items)``.

Each item becomes one Ray task ``fn(item)`` (``ray.remote`` with ``max_retries``): a task whose
worker process dies (killed, out of memory, node lost) is re-run up to ``max_retries`` times; an
exception raised by ``fn`` itself is not retried and re-raises in the driver with its own type
and message plus a note naming the task index and item, as with
:class:`probekit.executor.InProcessExecutor`. Results come back in input order.

Ray is imported when a map runs, never when this module is imported, so ``import
probekit.executors.ray`` (and ``get_executor("ray")``) work without Ray installed; the first
map then fails with one line saying how to install it.

Addresses: ``None`` starts (or reuses) a local cluster in this process with ``num_cpus``
workers; ``"auto"`` joins the cluster started on this node by ``ray start --head``;
``"HOST:PORT"`` joins a remote head (default port 6379); ``"ray://HOST:10001"`` uses Ray
Client. Every worker must be able to import ``probekit`` (the same version) and see the paths
the tasks read and write (a shared filesystem for stores and runs), the folders of plug-in
modules included (:func:`probekit.executor.worker_imports`: each task imports them first).

Reference: Moritz et al. (2018), "Ray: A Distributed Framework for Emerging AI Applications",
OSDI; fault tolerance as documented for Ray tasks (``max_retries``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from ..errors import ConfigError
from ..executor import (
    CliAlias,
    WorkerImport,
    import_worker_modules,
    register_executor,
    task_note,
    worker_imports,
)
from ..progress import progress_bar
from ..util.constraints import Ge, Gt, Validated

__all__ = ["RayExecutor", "check_address", "check_reachable", "make_ray_executor"]

START_HINT = (
    "start a cluster with `ray start --head` on the head node (`ray start --address HEAD:6379` "
    "on each worker node), then pass --ray-address HEAD:6379 (or 'auto' on a cluster node); "
    "without an address a local cluster starts in this process"
)
INSTALL_HINT = "pip install 'probekit-interp[ray]'"

_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


def _import_ray() -> Any:
    """The ``ray`` module, or a one-line :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"executor 'ray' needs the ray package, which is not installed; {INSTALL_HINT}"
        ) from None
    return ray


def check_address(address: str | None) -> None:
    """Refuse an address Ray cannot parse, naming it and the accepted forms."""
    if address is None or address in ("auto", "local") or address.startswith("ray://"):
        return
    m = _HOST_PORT.match(address)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise ConfigError(
            f"Ray address {address!r} is not 'auto', 'local', HOST:PORT or ray://HOST:PORT; "
            f"{START_HINT}"
        )


def check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast (one line) when nothing listens at ``HOST:PORT`` (Ray itself retries ~minutes)."""
    m = _HOST_PORT.match(address)
    if m is None:  # 'auto', 'local', ray://: Ray's own errors are quick
        return
    host = m["host"].strip("[]")
    try:
        socket.create_connection((host, int(m["port"])), timeout=timeout_s).close()
    except OSError as err:
        raise ConfigError(
            f"no Ray cluster reachable at address {address!r} ({err.strerror or err}); "
            f"{START_HINT}"
        ) from None


def _run_task(fn: Any, item: Any, imports: tuple[WorkerImport, ...] = ()) -> Any:
    """The body of every Ray task: ``fn(item)``.

    With ``imports`` (the driver's plug-in modules, :func:`probekit.executor.worker_imports`)
    ``fn`` and ``item`` arrive pickled (``bytes``): the worker imports the plug-ins first, then
    unpickles them, so a spec of a plug-in class resolves on a worker that never imported it
    (Ray deserialises a task's arguments before its body runs).
    """
    if imports:
        import pickle

        import_worker_modules(imports)
        fn, item = pickle.loads(fn), pickle.loads(item)
    return fn(item)


_REMOTE: dict[str, Any] = {}


def _remote_task(ray: Any) -> Any:
    """``ray.remote(_run_task)``, built once per process (exporting a function costs a round trip)."""
    if "task" not in _REMOTE:
        _REMOTE["task"] = ray.remote(_run_task)
    return _REMOTE["task"]


@dataclass(frozen=True, kw_only=True)
class RayExecutor(Validated):
    """Run independent tasks as Ray tasks on a local or remote cluster.

    Attributes:
        address: ``None`` (local cluster in this process), ``"auto"`` (the cluster of this
            node), ``"HOST:PORT"`` (a head started with ``ray start --head``, port 6379) or
            ``"ray://HOST:PORT"`` (Ray Client).
        num_cpus: CPUs of the local cluster started when ``address`` is None (default: all);
            not allowed with an address (the cluster's nodes declare their own).
        max_retries: re-runs of a task whose worker died (system failures only; an exception
            raised by the task is never retried: the same input would raise it again).
        task_cpus: CPUs reserved per task (1: one task per core; torch in the task then uses
            one intra-op thread, Ray sets ``OMP_NUM_THREADS`` from it).
        progress: bar over finished tasks (:mod:`probekit.progress`); ``True`` from the first
            task, ``False`` never, ``None`` once the map has run for a second.
        connect_timeout_s: seconds to wait for a TCP connection to ``HOST:PORT`` up front.

    If Ray is already initialised in this process (a test fixture, a notebook, or a task
    running on a Ray worker), that session is used and ``address``/``num_cpus`` are ignored.
    """

    address: str | None = None
    num_cpus: Annotated[int | None, Ge(1, hint="or None: all")] = None
    max_retries: Annotated[int, Ge(0)] = 3
    task_cpus: Annotated[float, Gt(0)] = 1.0
    progress: bool | None = None
    connect_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        """The declared rules, then the address and its combination with ``num_cpus`` (no connection)."""
        super().__post_init__()
        check_address(self.address)
        if self.num_cpus is not None and self.address is not None:
            raise ConfigError(
                f"RayExecutor num_cpus={self.num_cpus} with address {self.address!r}: an existing "
                "cluster's nodes set their CPUs (`ray start --num-cpus N`); drop num_cpus"
            )

    def connect(self) -> None:
        """Initialise Ray for this executor (idempotent); one-line :class:`ConfigError` if it fails.

        Call it up front (the CLI does) to fail before any model loads; :meth:`map` calls it too.
        """
        ray = _import_ray()
        if self.address is not None:  # even when Ray is up: an explicit dead address is an error
            check_reachable(self.address, self.connect_timeout_s)
        if ray.is_initialized():
            return
        try:
            ray.init(
                address=self.address, num_cpus=self.num_cpus, include_dashboard=False,
                logging_level=logging.WARNING, configure_logging=True,
            )
        except ConnectionError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(
                f"cannot connect to a Ray cluster at address {self.address!r} ({first}); "
                f"{START_HINT}"
            ) from None

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], *, desc: str | None = None
    ) -> list[Any]:
        """``[fn(item) for item in items]`` as Ray tasks; order preserved, progress over ``ray.wait``.

        Raises:
            Exception: the first failing task's own exception (type and message kept) with notes
                naming the task index, function and item, and the remote traceback.
            ConfigError: Ray missing or the cluster unreachable (one line with the fix).
        """
        items = list(items)
        if not items:
            return []
        self.connect()
        ray = _import_ray()
        remote = _remote_task(ray).options(
            max_retries=self.max_retries, retry_exceptions=False, num_cpus=self.task_cpus
        )
        imports = worker_imports()
        if imports:  # plug-in modules: the worker imports them before unpickling fn and items
            dumps = ray.cloudpickle.dumps  # what Ray itself would use; pickle.loads reads it
            fn_ref = ray.put(dumps(fn))
            refs = [remote.remote(fn_ref, dumps(item), imports) for item in items]
        else:
            fn_ref = ray.put(fn)  # shipped once, not once per task
            refs = [remote.remote(fn_ref, item) for item in items]
        index_of = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        with progress_bar(total=len(refs), desc=desc or "tasks", unit="task", enabled=self.progress,
                          leave=False, delay=0 if self.progress else None) as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    i = index_of[ref]
                    try:
                        results[i] = ray.get(ref)
                    except Exception as err:
                        _cancel(ray, pending)
                        raise _task_error(ray, err, fn, i, items[i], desc) from None
                    bar.update(1)
        return results


    def map_each_node(self, fn: Callable[[Any], Any], item: Any) -> list[Any]:
        """``fn(item)`` once on every alive node of the cluster (e.g. a path check), in node order.

        Each task is pinned to its node (``NodeAffinitySchedulingStrategy``, not soft) and
        reserves no CPU, so it runs even while the cluster is busy.
        """
        self.connect()
        ray = _import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
        remote = _remote_task(ray)
        fn_ref = ray.put(fn)
        refs = [remote.options(num_cpus=0, max_retries=self.max_retries,
                               scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                .remote(fn_ref, item) for node in nodes]
        return ray.get(refs)


def _cancel(ray: Any, refs: list[Any]) -> None:
    """Best-effort cancellation of the tasks still pending after a failure."""
    for ref in refs:
        with contextlib.suppress(Exception):  # already finished or gone: nothing to cancel
            ray.cancel(ref)


def _task_error(
    ray: Any, err: Exception, fn: Callable[..., Any], index: int, item: Any, desc: str | None
) -> BaseException:
    """The task's own exception (unwrapped from ``RayTaskError``) with notes naming the task."""
    out: BaseException = err
    remote_tb = None
    if isinstance(err, ray.exceptions.RayTaskError):
        # ray.get raises a subclass of both RayTaskError and the cause's class; its str() holds
        # the remote traceback
        remote_tb = str(err)
        cause = err.cause
        if isinstance(cause, BaseException):
            out = cause
    out.add_note(task_note(fn, index, item, desc))
    if remote_tb:
        out.add_note(f"remote traceback (Ray worker):\n{remote_tb.rstrip()}")
    return out


def make_ray_executor(**options: Any) -> RayExecutor:
    """Factory registered as ``"ray"``: ``RayExecutor(**options)``, Ray checked to be installed.

    Raises:
        ConfigError: Ray is not installed (the message gives the pip command) or an option is
            invalid.
    """
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ConfigError(
            f"executor 'ray' needs the ray package, which is not installed; {INSTALL_HINT}"
        )
    return RayExecutor(**options)


# the options are RayExecutor's fields, validated by its __post_init__ (no connection, no ray import)
register_executor("ray", make_ray_executor, options=RayExecutor, aliases=(CliAlias(
    flag="--ray-address", option="address", metavar="auto|HOST:PORT",
    help="Ray cluster to join: 'auto' on a node of a cluster started with `ray start --head`, or "
    "the head's HOST:6379; unset: a local cluster in this process",
),))
