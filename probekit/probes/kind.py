"""Probe kinds: one strategy object per probe family, looked up by name in a registry.

A probe kind says how a family is fit in a batched layer sweep, how its predictions are scored,
what chance is, which hyperparameter grid it searches and whether the permutation test and the
control task (Hewitt & Liang 2019) apply to it. :func:`~probekit.probes.sweep_layers`,
:func:`~probekit.probes.probe_permutation_test` and the ``[[probe]]`` suite section ask the
kind; none of them names one. Built-in kinds live in :mod:`probekit.probes.kinds` (one module
each: ``logistic``, ``ridge``, ``diffmeans``), imported when the registry is first used.

A new kind is one module (or one class in a test) that subclasses :class:`ProbeKind` and
registers itself::

    @register_probe_kind
    class NearestMean(ProbeKind):
        name = "nearest_mean"
        metric = "accuracy"
        chance_text = "majority-class rate of the test split"

        def fit_batched(self, X, labels, train_idx, splits, config) -> GroupFit: ...
        def score(self, pred, y): return (pred == y).mean(-1)

Module-level imports stay light (numpy only; torch and the solvers are imported inside the
methods): suite validation looks the kind up and must not import torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from ..errors import ConfigError, DataError
from ..util.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from .sweep import SweepConfig

__all__ = [
    "PROBE_KINDS",
    "GroupFit",
    "ProbeKind",
    "probe_kind",
    "register_probe_kind",
    "registered_probe_kinds",
]


@dataclass(frozen=True, kw_only=True)
class GroupFit:
    """What :meth:`ProbeKind.fit_batched` returns for ``G`` rows sharing a feature size.

    Attributes:
        train: ``(G,)`` metric on the training split.
        val: ``(G,)`` CV validation metric (selects the hyperparameter and the best row).
        hyperparameter: ``(G,)`` selected hyperparameter per row (NaN when the kind has none).
        predictions: split name -> ``(G, n_split)`` predictions scored by :meth:`ProbeKind.score`.
        converged: ``(G,)`` whether each row's final fit converged (None: closed form, always).
    """

    train: np.ndarray
    val: np.ndarray
    hyperparameter: np.ndarray
    predictions: Mapping[str, np.ndarray]
    converged: np.ndarray | None = None


class ProbeKind(ABC):
    """Strategy of one probe family (see the module docstring).

    Class attributes:
        name: registry name (``[[probe]] kind``, ``SweepConfig(probe=...)``).
        metric: name of the score (``accuracy``, ``r2``, ``auroc``).
        chance_text: what :meth:`chance` is, in words (the report's reference line).
        is_classifier: labels are classes (class splits are checked; suite labels are strings).
        supports_permutation: :meth:`permutation_scores` is implemented.
        supports_control: a control task (labels re-drawn per type) is meaningful.
    """

    name: ClassVar[str]
    metric: ClassVar[str]
    chance_text: ClassVar[str]
    is_classifier: ClassVar[bool] = True
    supports_permutation: ClassVar[bool] = False
    supports_control: ClassVar[bool] = True

    def prepare_labels(self, labels: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
        """The ``(n,)`` labels the kind fits, checked (default: unchanged).

        Raises:
            DataError: labels the kind cannot fit (naming the kind that can).
        """
        return labels

    def suite_labels(self, values: Sequence[Any]) -> np.ndarray:
        """A suite data column as labels: class names (strings) or numbers (non-classifiers)."""
        if self.is_classifier:
            return np.asarray([str(v) for v in values])
        return np.asarray(values, dtype=float)

    def grid(self, config: SweepConfig) -> np.ndarray | None:
        """The hyperparameter grid searched by CV (None: the kind has no hyperparameter)."""
        return None

    @abstractmethod
    def fit_batched(
        self,
        X: Tensor,
        labels: np.ndarray,
        train_idx: np.ndarray,
        splits: Mapping[str, np.ndarray],
        config: SweepConfig,
    ) -> GroupFit:
        """Fit ``G`` rows of ``X`` ``(G, n, d)`` on ``train_idx`` (hyperparameter by CV).

        Args:
            X: ``(G, n, d)`` activations of rows with equal ``d``, on the solve device.
            labels: ``(n,)`` labels from :meth:`prepare_labels`.
            train_idx: training example indices.
            splits: evaluation split name -> example indices (``test``, ``ood:NAME``).
            config: the sweep's options (grids, ``cv``, dtype, solver settings).
        """

    @abstractmethod
    def score(self, predictions: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Metric over the last axis: ``(..., n)`` predictions vs ``(..., n)``/``(n,)`` labels."""

    def chance(self, y_test: np.ndarray) -> float:
        """The metric of a probe that learned nothing, on test labels ``y_test``."""
        raise NotImplementedError(f"probe kind {self.name!r} defines no chance level")

    def permutation_scores(
        self,
        X: np.ndarray,
        labels: np.ndarray,
        perms: np.ndarray,
        train_idx: np.ndarray,
        test_idx: np.ndarray,
        *,
        hyperparameter: float | None,
        Cs: int,
        cv: int,
        batch_size: int,
        dtype: torch.dtype,
        device: str | torch.device | None,
    ) -> tuple[np.ndarray, str]:
        """Test scores of probes refit on each labelling (row 0: the real labels).

        Args:
            X: ``(n, d)`` float64 activations.
            labels: ``(n,)`` the real labels.
            perms: ``(1 + n_permutations, n)`` class codes (``np.unique`` order), row 0 real.
            train_idx: the split the probes are fit on.
            test_idx: the split they are scored on.
            hyperparameter: fixed across refits (None: chosen once by CV on the real labels).
            Cs: grid size of that CV.
            cv: folds of that CV.
            batch_size: labellings per batched solve.
            dtype: compute dtype of the refits.
            device: where the refits run (None: the CPU).

        Returns:
            ``((1 + n_permutations,) scores, method text)``.
        """
        raise ConfigError(
            f"probe kind {self.name!r} has no permutation test; use one of "
            f"{[k for k in registered_probe_kinds() if probe_kind(k).supports_permutation]}"
        )

    def __repr__(self) -> str:
        return f"<probe kind {self.name!r}>"


def need_binary(kind: str, labels: np.ndarray) -> np.ndarray:
    """The two classes of ``labels`` (sorted), or a :class:`DataError` naming the fix."""
    classes = np.unique(labels)
    if len(classes) != 2:
        raise DataError(
            f"probe={kind!r} needs binary labels, got {len(classes)} classes in the training "
            f"split ({classes.tolist()[:10]}); use probe='logistic'"
        )
    return classes


#: The entry-point group of installed distributions' probe kinds (each value a module).
ENTRY_POINT_GROUP = "probekit.probe_kinds"

#: The probe kinds by name; built-ins (:mod:`probekit.probes.kinds`), then the entry points of
#: :data:`ENTRY_POINT_GROUP`, load on first lookup.
PROBE_KINDS: Registry[ProbeKind] = Registry(
    "probe kind", plugins=f"{__package__}.kinds", group=ENTRY_POINT_GROUP,
    hint="a new kind subclasses probekit.probes.ProbeKind and is decorated with @register_probe_kind",
)

K = TypeVar("K", bound=type[ProbeKind])


def register_probe_kind(cls: K) -> K:
    """Class decorator registering an instance of ``cls`` under ``cls.name``.

    Registering a name twice from a different class is refused (a :class:`ConfigError` naming
    both classes; :class:`~probekit.util.registry.Registry`).
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"probe kind {cls.__name__} needs a class attribute name = 'identifier'")
    PROBE_KINDS.register(name, cls(), origin=cls)
    return cls


def registered_probe_kinds() -> tuple[str, ...]:
    """Names of every registered probe kind (built-ins loaded), sorted."""
    return PROBE_KINDS.names()


def probe_kind(name: str) -> ProbeKind:
    """The kind registered as ``name``.

    Raises:
        ConfigError: unknown name; the message lists the registered kinds.
    """
    return PROBE_KINDS.get(name)
