"""Intervention operations: frozen specs of what to do at one :class:`~probekit.sites.Site`.

Every op names a ``site`` (with an optional head) and, for writes, *where*: ``positions`` is a
position rule (:class:`~probekit.capture.LastToken`, ``TokenIndex``, ``SpanMean`` = every token
of the span, ``AllTokens``) or a boolean mask ``(batch, pos)`` / ``(batch, pos, head)`` in
unpadded coordinates; ``rows`` restricts a write to some batch rows; ``features`` to some indices
of the last axis (e.g. MLP neurons). Tensors handed in or out are *aligned*: index ``t`` on the
position axis is unpadded token ``t`` (:mod:`probekit.capture.layout`), so a cache read from one
padding layout patches a run with another.

Ops at the same site run in the order given; a :class:`Read` sees the value as left by the ops
before it, a :class:`Grad` is taken with respect to the value the site finally passes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated

from torch import Tensor

from ..capture.positions import AllTokens, PositionRule
from ..errors import ConfigError
from ..sites import Site
from ..util.constraints import OneOf, validate

Positions = PositionRule | Tensor


def _check_site(site: Site) -> None:
    if not isinstance(site, Site):
        raise ConfigError(f"op site must be a probekit Site, got {site!r}; use Site.parse(text)")


@dataclass(frozen=True, kw_only=True, eq=False)
class SiteOp:
    """Base of every op: the :class:`~probekit.sites.Site` it acts on (validated)."""

    site: Site

    def __post_init__(self) -> None:
        """Validate the site."""
        _check_site(self.site)


@dataclass(frozen=True, kw_only=True, eq=False)
class WriteOp(SiteOp):
    """Base of the write ops: *where* to write (validated).

    ``positions``: a position rule or an aligned boolean mask ``(batch, pos)`` /
    ``(batch, pos, head)`` (default every real token); ``rows``: only these batch rows;
    ``features``: only these indices of the last axis.
    """

    positions: Positions = field(default_factory=AllTokens)
    rows: tuple[int, ...] | None = None
    features: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """Validate the site and features."""
        super().__post_init__()
        if self.features is not None and (not self.features or min(self.features) < 0):
            raise ConfigError(
                f"features must be a non-empty tuple of indices >= 0, got {self.features!r}"
            )


@dataclass(frozen=True, kw_only=True, eq=False)
class Read(SiteOp):
    """Record the site's activation (detached).

    ``positions=None`` keeps the whole aligned tensor ``(batch, pos, *feat)`` (pad entries 0); a
    position rule keeps the selected rows ``(row, *feat)`` as
    :func:`~probekit.capture.select_positions` does.
    """

    positions: PositionRule | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Replace(WriteOp):
    """Overwrite the selected cells with ``values`` (aligned ``(batch, pos, *feat)``), e.g. a cache.

    Patching from a clean cache: ``Replace(site=s, values=clean.reads[s])``.
    """

    values: Tensor


@dataclass(frozen=True, kw_only=True, eq=False)
class ReplaceByToken(WriteOp):
    """Overwrite each selected cell with ``table[id]``, ``id`` the input token at that position.

    ``table``: ``(d_vocab, *feat)``, e.g. an edited embedding matrix at ``embed`` (removing some
    Fourier components of the residue tokens' embeddings: a row per token, the others kept).
    """

    table: Tensor


@dataclass(frozen=True, kw_only=True, eq=False)
class ReplaceFromRows(WriteOp):
    """Patch row ``i`` with row ``source_rows[i]`` of the same batch (same unpadded positions).

    ``source_rows[i] = -1`` leaves row ``i`` alone. A selected position must exist in the source
    row (e.g. ``LastToken`` of rows of equal length, or a ``TokenIndex`` within both).
    """

    source_rows: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, eq=False)
class Ablate(WriteOp):
    """Zero-, mean- or resample-ablate the selected cells.

    ``zero``: 0. ``mean``: ``mean`` (``(*feat)`` or per position ``(pos, *feat)``, aligned); by
    default the mean over every real token of this batch. ``resample``: each row takes a random
    row of ``pool`` (aligned ``(n, pos, *feat)``, e.g. a reference-data :class:`Read`) drawn with
    ``seed``; without a pool, another row of this batch (a random derangement).
    """

    #: a ``str`` with its choices declared (a clear error, not a type error)
    method: Annotated[str, OneOf(("zero", "mean", "resample"), hint="the ablation method")] = "zero"
    mean: Tensor | None = None
    pool: Tensor | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate site and features, then the declared rules (``method``)."""
        super().__post_init__()
        validate(self)


@dataclass(frozen=True, kw_only=True, eq=False)
class Add(WriteOp):
    """Add ``scale * vector`` at the selected cells (steering).

    ``vector`` is ``(*feat)`` (the same at every cell) or aligned ``(batch, pos, *feat)``.
    """

    vector: Tensor
    scale: float = 1.0


@dataclass(frozen=True, kw_only=True, eq=False)
class Grad(SiteOp):
    """Record d(objective)/d(activation) at the site, aligned ``(batch, pos, *feat)`` or rows.

    The run must have gradients on; the objective is given to
    :func:`~probekit.interventions.run_with_interventions` or
    :meth:`~probekit.interventions.InterventionResult.backward`.
    """

    positions: PositionRule | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Recompute(WriteOp):
    """Overwrite the selected cells with ``fn(value, inputs)``, computed from this same forward pass.

    ``inputs`` are sites the forward pass reaches *before* ``site``; ``fn`` receives the site's
    aligned value ``(batch, pos, *feat)`` and ``{input site: its aligned value}`` as the run left
    them (after their own ops, not detached, so gradients flow) and returns the new aligned
    value, same shape. E.g. edge patching: a component's input minus the differences between
    some upstream outputs of this run and their values in a corrupted run.
    """

    fn: Callable[[Tensor, Mapping[Site, Tensor]], Tensor]
    inputs: tuple[Site, ...] = ()

    def __post_init__(self) -> None:
        """Validate the sites."""
        super().__post_init__()
        for s in self.inputs:
            _check_site(s)


Op = Read | Replace | ReplaceByToken | ReplaceFromRows | Ablate | Add | Grad | Recompute
WRITE_OPS = (Replace, ReplaceByToken, ReplaceFromRows, Ablate, Add, Recompute)
