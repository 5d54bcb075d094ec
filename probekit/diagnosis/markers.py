"""Marker values of one checkpoint: a registered measurement kind's estimate and CI, cached.

A ``[[marker]]`` names a measurement kind (:mod:`probekit.hypotheses.registry`); on a
checkpoint its value is the kind's :class:`~probekit.hypotheses.measurement.Measurement`
estimate, with the percentile bootstrap CI (Efron & Tibshirani 1993) of its resamples (the
kind's own, or of the mean of its per-unit values) at ``[stats] confidence_level``. A kind that
raises :class:`~probekit.errors.NotApplicableError` gives an explicit not-applicable cell
(``value=None`` and the reason), never a NaN; so does a block the checkpoint does not have
(negative block indices count from each checkpoint's last block: :mod:`.block_index`).

Cells are cached per (checkpoint fingerprint, marker key) as small JSON files written
atomically (:class:`CellStore`), so a killed diagnosis resumes without redoing finished cells and
a new ``[[marker]]`` computes only itself. The key digests everything that changes the value:
the kind, its keys, the file's ``[data]``, ``[capture]`` and ``[stats]`` sections, and for a
plug-in kind its code (source digest or distribution version), so an edited plug-in is measured
again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import Context
from ..errors import CorruptFileError
from ..util.integrity import read_sealed, seal
from ..util.io import atomic_write_json, sha256_bytes, sha256_file
from .block_index import block_indices, resolve_blocks
from .spec import MarkerSpec

__all__ = [
    "CellStore",
    "MarkerCell",
    "checkpoint_fingerprint",
    "marker_key",
    "measure_marker",
    "reference_similarity",
]


@dataclass(frozen=True, kw_only=True)
class MarkerCell:
    """One (checkpoint, marker) cell of the table.

    Attributes:
        marker: the marker's name.
        value: the measurement's estimate; ``None`` when not applicable.
        low, high: its CI (``None`` when not applicable).
        metric, n, unit: what was measured and over how many units.
        reason: why the marker is not applicable to this checkpoint (``None`` when it is).
    """

    marker: str
    value: float | None
    low: float | None = None
    high: float | None = None
    metric: str = ""
    n: int = 0
    unit: str = ""
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarkerCell:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def marker_key(marker: MarkerSpec, suite: Any) -> str:
    """Digest (16 hex digits) of what a marker's value depends on besides the checkpoint.

    A plug-in kind's code identity is part of it (:func:`~probekit.hypotheses.plugin_version.kind_version`):
    editing the plug-in measures its markers again.
    """
    from ..hypotheses.plugin_version import kind_version
    from ..hypotheses.registry import find_kind

    kind = find_kind(marker.measure)
    version = None if kind is None else kind_version(kind)
    payload = {
        **({} if version is None else {"plugin": version}),
        "measure": marker.measure, "spec": dataclasses.asdict(marker.spec),
        **({} if marker.reference is None else {"reference": marker.reference}),
        "data": dataclasses.asdict(suite.data), "capture": dataclasses.asdict(suite.capture),
        "stats": dataclasses.asdict(suite.stats),
    }
    return sha256_bytes(json.dumps(_plain(payload), sort_keys=True).encode())[:16]


def checkpoint_fingerprint(path: str | Path) -> str:
    """sha256 (16 hex digits) of a checkpoint's config and weights files: its cache identity."""
    path = Path(path)
    parts = [sha256_file(path / name) for name in ("config.json", "model.safetensors")
             if (path / name).is_file()]
    return sha256_bytes("|".join(parts).encode())[:16]


class CellStore:
    """Finished cells under ``root/<checkpoint fingerprint>/<key>.json`` (atomic writes)."""

    def __init__(self, root: str | Path) -> None:
        """Hold the root directory (created on the first write)."""
        self.root = Path(root)

    def path(self, fingerprint: str, key: str) -> Path:
        """The file of one cell."""
        return self.root / fingerprint / f"{key}.json"

    def get(self, fingerprint: str, key: str) -> dict[str, Any] | None:
        """The recorded cell, or ``None`` (also for a damaged record: it is then redone).

        A record that is not JSON or fails its checksum (:mod:`probekit.util.integrity`) is
        never trusted: it is reported in one logged warning naming the file and measured again.
        """
        path = self.path(fingerprint, key)
        if not path.is_file():
            return None
        try:
            return read_sealed(path, what="diagnosis cell", fix="it is measured again")
        except CorruptFileError as err:
            logging.getLogger("probekit").warning("%s", err)
            return None

    def put(self, fingerprint: str, key: str, value: dict[str, Any]) -> None:
        """Record a finished cell atomically."""
        path = self.path(fingerprint, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, seal(value))


def reference_similarity(spec: Any, ctx: Context, reference: Context) -> Any:
    """CKA of ``site_a`` on the context's model with ``site_b`` on a reference model.

    The ``representational_similarity`` kind's statistic (Kornblith et al. 2019, linear or RBF
    CKA; :func:`probekit.similarity.cka`) with its two activation matrices taken from two
    models on the same inputs: rows ``i`` of both are example ``i`` of ``ctx``'s ``split``
    (``reference`` is a context on the same examples). Bootstrap over examples as the kind.

    Args:
        spec: the kind's ``SimilaritySpec`` (``site_a``, ``site_b``, ``split``, ``kernel``,
            ``debiased``).
        ctx: the checkpoint's context.
        reference: the reference checkpoint's context (same ``examples``).

    Raises:
        DataError: the two contexts hold different inputs.
    """
    import numpy as np

    from ..errors import DataError
    from ..fingerprint import dataset_fingerprint
    from ..hypotheses.measurement import Measurement
    from ..similarity import cka
    from ..sites import Site
    from ..stats.bootstrap import bootstrap_indices

    if dataset_fingerprint(ctx.examples.tokens) != dataset_fingerprint(reference.examples.tokens):
        raise DataError("the reference checkpoint's context holds other inputs than the "
                        "checkpoint's; build it with examples=ctx.examples")
    a, b = Site.parse(spec.site_a), Site.parse(spec.site_b)
    idx = ctx.examples.split(spec.split)
    X = ctx.activations([a])[a].double().cpu().numpy()[idx]
    Y = reference.activations([b])[b].double().cpu().numpy()[idx]
    boot = bootstrap_indices(len(idx), ctx.stats.n_bootstrap, ctx.stats.seed)
    reps = np.array([cka(X[r], Y[r], spec.kernel, spec.debiased) for r in boot])
    return Measurement(
        metric=f"{'debiased ' if spec.debiased else ''}{spec.kernel} CKA to the reference",
        estimate=cka(X, Y, spec.kernel, spec.debiased), resamples=reps, n=len(idx),
        unit=f"{spec.split} examples",
        method=f"CKA between {a.key} and the reference checkpoint's {b.key} over {len(idx)} "
        f"{spec.split} examples (bootstrap over examples)",
    )


def _depth(ctx: Context) -> int | None:
    """The context's model's number of blocks (``None`` for a stand-in context without a model)."""
    n = getattr(getattr(ctx.model, "cfg", None), "n_layers", None)
    return None if n is None else int(n)


def measure_marker(marker: MarkerSpec, ctx: Context, reference: Context | None = None, *,
                   model: str = "?") -> MarkerCell:
    """The marker on the context's model: estimate and percentile CI, or not applicable.

    The kind is called through :func:`~probekit.hypotheses.calls.call_kind`: a plug-in's
    failure (an exception, ``sys.exit``, a result that is no ``Measurement``) and a non-finite
    value are one line naming the marker, ``model`` and the kind (and its plug-in module).

    Args:
        marker: the ``[[marker]]`` spec.
        ctx: an :class:`~probekit.suites.context.AnalysisContext` whose model is the checkpoint.
        reference: with ``marker.reference``, the context of the reference checkpoint on the
            same examples (:func:`reference_similarity`).
        model: how messages name the checkpoint or model entry.

    Raises:
        ConfigError: a marker with a reference and no reference context, or the reverse.
        PluginError: a plug-in kind failed (:mod:`probekit.hypotheses.calls`).
    """
    from ..errors import ConfigError, NotApplicableError
    from ..hypotheses.calls import call_kind
    from ..hypotheses.registry import get_kind
    from ..stats.bootstrap import bootstrap_indices, percentile_interval

    if (marker.reference is None) != (reference is None):
        raise ConfigError(f"marker {marker.name!r}: reference {marker.reference!r} needs exactly "
                          "a reference context (and one without a reference none)")
    kind = get_kind(marker.measure)
    try:  # negative blocks count from this model's last; a block it lacks: not applicable
        spec, depth = marker.spec, _depth(ctx)
        if depth is not None and block_indices(spec):
            spec = resolve_blocks(spec, depth, reference_layers=(
                None if reference is None else _depth(reference)))
        if reference is not None:
            m = reference_similarity(spec, ctx, reference)
        else:
            m = call_kind(kind, spec, ctx, subject=f"marker {marker.name!r} on model {model!r}",
                          control=False if kind.control else None)
    except NotApplicableError as err:
        return MarkerCell(marker=marker.name, value=None, reason=str(err))
    st = ctx.stats
    if m.resamples is not None:
        reps = m.resamples
    else:
        reps = m.values[bootstrap_indices(m.values.size, st.n_bootstrap, st.seed)].mean(axis=1)
    low, high = (float(x) for x in percentile_interval(reps, st.confidence_level))
    return MarkerCell(marker=marker.name, value=float(m.estimate), low=low, high=high,
                      metric=m.metric, n=int(m.n), unit=m.unit)
