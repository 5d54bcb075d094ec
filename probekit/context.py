"""What an analysis, a measurement kind or a method package's suite entry point reads of its context.

:class:`Context` is the structural type of ``ctx``: the suite's
:class:`~probekit.suites.context.AnalysisContext` satisfies it, and so does any stand-in with the
same members (the fake contexts of the tests). :class:`RunContext` adds what a suite analysis
uses besides: the resolved device, progress bars, the cache root, the model fingerprint, the
default sites and the count of forward passes run.

Both are ``runtime_checkable`` (so the annotation is checked when tests run with beartype) with
the members looked up statically (:mod:`typing_extensions` gives Python 3.12's
``inspect.getattr_static`` semantics on 3.11): an ``isinstance`` check never evaluates a lazy
property, so checking a context never loads its model. What the members offer of the suite, its
``[stats]`` settings and its examples is typed by the protocols of this module
(:class:`SuiteView`, :class:`StatsView`, :class:`ExamplesView`; the suite's own classes satisfy
them), so the module imports nothing above its layer, annotation-only imports included (its
``Site`` and ``Executor`` sit below it; the import contract ``context`` of ``pyproject.toml``
checks imports under ``TYPE_CHECKING`` too). The method packages and every layer above them may
import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

    from .executor import Executor
    from .sites import Site

__all__ = ["Context", "ExamplesView", "RunContext", "StatsView", "SuiteView"]


@runtime_checkable
class SuiteView(Protocol):
    """What ``ctx.suite`` offers (:class:`probekit.suites.spec.Suite` satisfies it).

    Attributes:
        data: the ``[data]`` settings (``data.label``, ``data.path`` ...).
        capture: the ``[capture]`` settings (``capture.positions``, ``capture.batch_size`` ...).
        source: the suite file (``""``: built in code).
    """

    data: Any
    capture: Any
    source: str

    def resolve(self, relative: str | None) -> Path | None:
        """A path of the suite, relative to the suite file's folder."""
        ...


@runtime_checkable
class StatsView(Protocol):
    """What ``ctx.stats`` offers (:class:`probekit.suites.spec.StatsSpec` satisfies it)."""

    n_bootstrap: int
    n_permutations: int
    confidence_level: float
    alpha: float
    seed: int


@runtime_checkable
class ExamplesView(Protocol):
    """What ``ctx.examples`` offers (:class:`probekit.suites.data.Examples` satisfies it).

    Attributes:
        tokens: one token-id sequence per example (row).
        columns: per-example metadata columns.
        vocab: the testbed's vocabulary (``None`` for JSONL data).
    """

    tokens: list[list[int]]
    columns: dict[str, list[Any]]
    vocab: Any

    def __len__(self) -> int:
        ...

    def column(self, name: str) -> list[Any]:
        """The values of column ``name``, one per example."""
        ...

    def split(self, name: str) -> np.ndarray:
        """Example indices of split ``name`` (``train``, ``test``, ``ood:NAME``)."""
        ...

    def pairs(
        self, *, pair_column: str = "pair_id", role_column: str = "role",
        clean: str = "clean", corrupt: str = "corrupt",
    ) -> tuple[np.ndarray, np.ndarray]:
        """Matched (clean, corrupt) example indices."""
        ...


@runtime_checkable
class Context(Protocol):
    """The inputs of a measurement kind or an analysis.

    Attributes:
        suite: the validated suite (``suite.data``, ``suite.capture``, ``suite.source``,
            ``suite.resolve(path)``).
        model: the suite's model (a context may load it lazily, on first access).
        examples: rows (token lists), ``columns``, ``split(name)``, ``column(name)``,
            ``pairs()`` and ``vocab``.
        stats: the ``[stats]`` settings (``n_bootstrap``, ``n_permutations``, ``alpha``,
            ``seed`` ...).
        executor: runs independent tasks (``executor.map(fn, items)``).
    """

    suite: SuiteView
    stats: StatsView
    executor: Executor

    @property
    def model(self) -> Any:
        """The suite's model."""
        ...

    @property
    def examples(self) -> ExamplesView:
        """The suite's examples."""
        ...

    def activations(self, sites: Sequence[Site] | None = None) -> dict[Site, Tensor]:
        """``site -> (example, d)`` activations at the ``[capture]`` positions (cached)."""
        ...


@runtime_checkable
class RunContext(Context, Protocol):
    """A :class:`Context` with what a suite analysis uses besides.

    Attributes:
        progress: whether to show progress bars.
        cache_dir: root of the suite's caches (activations, answers, neuron statistics ...).
        forward_passes: forward passes / generations actually run (an analysis that runs its
            own adds to it; 0 on a cached rerun).
    """

    progress: bool
    cache_dir: Path
    forward_passes: int

    @property
    def device(self) -> str:
        """Torch device name for the analyses' own computations."""
        ...

    @property
    def model_fingerprint(self) -> str:
        """Content fingerprint of the model."""
        ...

    def default_sites(self) -> list[Site]:
        """The sites of ``[capture]``."""
        ...
