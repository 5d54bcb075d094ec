"""Similarity measures: one strategy object per measure, looked up by name in a registry.

A measure says how the value of every needed layer pair is computed from the layers'
representations (sharing per-layer statistics across pairs), whether it is a distance (lower
is more similar) and whether it is symmetric, which options of :class:`SimilarityConfig` it
accepts, and how it is named in a report. :func:`~probekit.similarity.layer_similarity`,
:func:`~probekit.similarity.checkpoint_drift`, :func:`~probekit.similarity.seed_similarity`
and the ``[[similarity]]`` suite section ask the measure; none of them names one. Built-in
measures live in :mod:`probekit.similarity.measures` (``cka``, ``procrustes``, ``svcca``,
``pwcca``, ``rsa``), imported when the registry is first used.

A new measure is one module (or one class in a test) that subclasses
:class:`SimilarityMeasure` and registers itself::

    @register_similarity_measure
    class MeanCosine(SimilarityMeasure):
        name = "mean_cosine"

        def label(self, config): return "mean row cosine"
        def pair_values(self, reps, labels, pairs, config): ...  # ({(i, j): value}, n)

Every option lives in the one frozen :class:`SimilarityConfig`: ``measure`` picks the strategy,
the other fields are the measures' options, validated (with the measure's own
:meth:`SimilarityMeasure.check`) when the config is built, before any work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, TypeVar

import torch

from ..errors import ConfigError
from ..util.constraints import Ge, Gt, OneOf, check_value, validate
from ..util.registry import Registry
from .cka import DEFAULT_BANDWIDTH

if TYPE_CHECKING:
    from .streaming import Rep

__all__ = [
    "SIMILARITY_MEASURES",
    "SimilarityConfig",
    "SimilarityMeasure",
    "registered_similarity_measures",
    "register_similarity_measure",
    "similarity_measure",
]

Pairs = Sequence[tuple[int, int]]


@dataclass(frozen=True, kw_only=True)
class SimilarityConfig:
    """The options of a layer-similarity computation, shared by every measure.

    Attributes:
        measure: the registered measure (:func:`registered_similarity_measures`): ``"cka"``,
            ``"procrustes"`` (angular distance), ``"svcca"``, ``"pwcca"``, ``"rsa"``.
        kernel: CKA kernel, ``"linear"`` (streams) or ``"rbf"`` (in memory, ``n <= max_gram_n``).
        debiased: CKA with the unbiased HSIC estimator (Song et al. 2012; Nguyen et al. 2021).
        bandwidth: RBF bandwidth as a fraction of the median pairwise distance.
        keep: SVCCA/PWCCA truncation as in :func:`~probekit.similarity.cca_similarity`
            (an int: principal components kept; a float: variance fraction; None: the
            measure's default).
        rdm_metric: RSA's dissimilarity of two stimuli (:func:`~probekit.similarity.rdm`).
        rsa_method: RSA's comparison of two RDMs
            (:func:`~probekit.similarity.rsa.compare_vectors`).
        chunk_size: rows per block when streaming in-memory inputs.
        dtype: dtype of the per-block products of the streamed measures (accumulated in
            float64); ``torch.float32`` is ~2x faster at ~1e-6 relative error.
        max_gram_n: largest ``n`` for which a measure builds ``n x n`` matrices in memory
            (RBF Grams, RDMs).
        batch_size: minibatch CKA (Nguyen et al. 2021): unbiased HSIC per batch of this many
            consecutive rows, averaged, then the ratio (``debiased`` is implied).
        space: linear CKA / Procrustes in ``"feature"`` space (``d_i x d_j`` cross-products,
            streamed), ``"gram"`` space (one ``n x n`` Gram or SVD factor per layer) or
            ``"auto"``: Gram when ``layers * n^2`` is below the summed ``d_i d_j``.

    Raises:
        ConfigError: an unknown measure (the message lists the registered ones), a value
            outside its choices or range, or an option the measure cannot use.
    """

    measure: str = "cka"
    kernel: Annotated[str, OneOf(("linear", "rbf"))] = "linear"
    debiased: bool = False
    bandwidth: Annotated[float, Gt(0, hint="a fraction of the median distance")] = DEFAULT_BANDWIDTH
    keep: int | float | None = None
    rdm_metric: str = "correlation"
    rsa_method: str = "spearman"
    chunk_size: Annotated[int, Ge(1, hint="rows per block")] = 4096
    dtype: torch.dtype = torch.float64
    max_gram_n: Annotated[int, Ge(4)] = 4096
    batch_size: Annotated[int | None, Ge(4, hint="rows per minibatch, or None")] = None
    space: Annotated[str, OneOf(("auto", "feature", "gram"))] = "auto"

    def __post_init__(self) -> None:
        """A registered measure, ints for the sizes, the declared rules, then the measure's own checks."""
        strategy = similarity_measure(self.measure)
        for key in ("chunk_size", "max_gram_n", "batch_size"):  # ints only (True rows, 2.5 rows)
            check_value(type(self), key, getattr(self, key), types=True)
        validate(self)
        if self.dtype not in (torch.float64, torch.float32):
            raise ConfigError(f"dtype={self.dtype} must be torch.float64 or torch.float32")
        strategy.check(self)

    @property
    def strategy(self) -> SimilarityMeasure:
        """The registered :class:`SimilarityMeasure` named by ``measure``."""
        return similarity_measure(self.measure)

    @property
    def label(self) -> str:
        """The measure with its options, as a report names it (``"debiased linear CKA"``)."""
        return self.strategy.label(self)


class SimilarityMeasure(ABC):
    """Strategy of one similarity measure (see the module docstring).

    Class attributes:
        name: registry name (``SimilarityConfig(measure=...)``, ``[[similarity]] measure``).
        distance: lower values mean more similar (0 = equal up to the measure's invariances);
            plots reverse their colour map and leave the axis unbounded.
        symmetric: ``value(i, j) == value(j, i)``; an asymmetric measure is computed for both
            orders of a within-model matrix.
    """

    name: ClassVar[str]
    distance: ClassVar[bool] = False
    symmetric: ClassVar[bool] = True

    def check(self, config: SimilarityConfig) -> None:
        """Refuse options this measure cannot use (default: minibatches are CKA's alone).

        Raises:
            ConfigError: naming the option and the measure that takes it.
        """
        if config.batch_size is not None:
            raise ConfigError(
                f"batch_size={config.batch_size} (minibatch CKA) needs measure='cka', got "
                f"measure={self.name!r}; drop batch_size"
            )

    @abstractmethod
    def label(self, config: SimilarityConfig) -> str:
        """The measure's name with its options, for reports and result tables."""

    @abstractmethod
    def pair_values(
        self, reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig,
    ) -> tuple[dict[tuple[int, int], float], int]:
        """The value of every pair ``(i, j)`` of ``reps`` (same stimuli, same order).

        Args:
            reps: ``(n, d_k)`` representations (tensors, arrays or
                :class:`~probekit.similarity.streaming.StreamedRep`).
            labels: a name per representation, for error messages.
            pairs: the ``(i, j)`` index pairs needed (``(i, i)`` when asked for).
            config: the options.

        Returns:
            ``({(i, j): value}, n)`` with ``n`` the number of stimuli.
        """

    def __repr__(self) -> str:
        return f"<similarity measure {self.name!r}>"


#: The measures by name; the modules of :mod:`probekit.similarity.measures` load on first lookup.
SIMILARITY_MEASURES: Registry[SimilarityMeasure] = Registry(
    "similarity measure", plugins=f"{__package__}.measures",
    hint="a new measure subclasses probekit.similarity.SimilarityMeasure and is decorated "
         "with @register_similarity_measure",
)

M = TypeVar("M", bound=type[SimilarityMeasure])


def register_similarity_measure(cls: M) -> M:
    """Class decorator registering an instance of ``cls`` under ``cls.name``.

    Registering a name twice from a different class is refused (a :class:`ConfigError` naming
    both classes).
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"similarity measure {cls.__name__} needs a class attribute name = 'identifier'")
    SIMILARITY_MEASURES.register(name, cls(), origin=cls)
    return cls


def registered_similarity_measures() -> tuple[str, ...]:
    """Names of every registered similarity measure (built-ins loaded), sorted."""
    return SIMILARITY_MEASURES.names()


def similarity_measure(name: str) -> SimilarityMeasure:
    """The measure registered as ``name``.

    Raises:
        ConfigError: unknown name; the message lists the registered measures.
    """
    return SIMILARITY_MEASURES.get(name)
