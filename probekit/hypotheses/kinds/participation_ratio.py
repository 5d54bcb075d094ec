"""``measure = "participation_ratio"``: effective dimension of a site's activations (Gao et al. 2017).

``PR = (sum_i l_i)^2 / sum_i l_i^2`` over the eigenvalues ``l_i`` of the activation covariance
(:func:`probekit.geometry.participation_ratio`): 1 when the points lie on a line, ``d`` when
they fill ``d`` dimensions isotropically. One of the baselines of Chou et al. (ICLR 2026) for
predicting OOD success from representational geometry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class ParticipationRatioSpec:
    """Keys of a ``participation_ratio`` claim.

    ``site``: activations at ``[capture] positions`` (e.g. ``"resid_post@1"``); ``split``: the
    examples used; ``per_class``: the mean over classes of each class's own PR (classes =
    values of ``label``, default ``[data] label``; every class needs >= 2 examples) instead of
    the PR of all points pooled.
    """

    site: str
    split: str = "train"
    per_class: bool = False
    label: str | None = None


def pr_of_weighted_rows(X: Any, weights: Any) -> Any:
    """PR of the covariance of ``X`` (``(n, d)``) with rows counted ``weights[b]`` times.

    ``PR = tr(C)^2 / ||C||_F^2`` (the eigenvalue formula, as ``sum l^2 = tr(C^2)``; the scale of
    ``C`` cancels). With ``m = w / sum w``, ``G = X X^T`` (``X`` centred once, which leaves every
    ``C`` unchanged) and ``H = G * G``: ``C = X^T diag(m) X - mu mu^T``, ``mu = X^T m``, so
    ``tr C = m.diag(G) - m^T G m`` and ``||C||_F^2 = m^T H m - 2 m.(G m)^2 + (m^T G m)^2``:
    ``O(n^2)`` per resample (``O(n d^2)`` through the ``d x d`` covariance when ``n > 3000``).
    """
    import numpy as np

    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(0)
    m = np.asarray(weights, dtype=np.float64)
    m = m / m.sum(1, keepdims=True)  # (B, n)
    if X.shape[0] > 3000:
        out = np.empty(m.shape[0])
        for b, mb in enumerate(m):
            xc = (X - mb @ X) * np.sqrt(mb)[:, None]
            cov = xc.T @ xc
            out[b] = np.trace(cov) ** 2 / np.sum(cov * cov)
        return out
    G = X @ X.T
    Gm = m @ G  # (B, n)
    mGm = np.einsum("bn,bn->b", m, Gm)
    trace = m @ np.diag(G) - mGm
    frob = np.einsum("bn,bn->b", m @ (G * G), m) - 2 * np.einsum("bn,bn->b", m, Gm**2) + mGm**2
    return trace**2 / frob


@register_measurement("participation_ratio", spec=ParticipationRatioSpec)
def participation_ratio(spec: ParticipationRatioSpec, ctx: Any) -> Measurement:
    """Participation ratio of the activation covariance at ``site``.

    Pooled: the PR of all ``split`` rows; CI by the bootstrap over rows (the PR recomputed on
    each resample). ``per_class``: one PR per class (the units), their mean and its bootstrap
    over classes.
    """
    import numpy as np

    from ...errors import DataError
    from ...geometry import participation_ratio as pr
    from ...geometry import participation_ratio_per_class
    from ...sites import Site
    from ...stats.bootstrap import bootstrap_indices

    site = Site.parse(spec.site)
    idx = ctx.examples.split(spec.split)
    X = ctx.activations([site])[site].double().cpu()[idx]
    where = f"{site.key} ({spec.split}, {len(idx)} rows, d = {X.shape[1]})"
    if spec.per_class:
        label = spec.label or ctx.suite.data.label
        y = np.asarray(ctx.examples.column(label))[idx]
        per = participation_ratio_per_class(X, y)[0].numpy()
        return Measurement(
            metric="participation ratio (class mean)", values=per, unit="classes",
            method=f"mean over {per.size} classes of {label!r} of the covariance participation "
            f"ratio (sum l)^2 / sum l^2 at {where} (Gao et al. 2017)",
            details={"site": site.key, "per_class": per.tolist()},
        )
    value = float(pr(X)[0])
    boot = bootstrap_indices(len(idx), ctx.stats.n_bootstrap, ctx.stats.seed)
    counts = np.stack([np.bincount(b, minlength=len(idx)) for b in boot]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = pr_of_weighted_rows(X.numpy(), counts)
    if not np.isfinite(reps).all():
        raise DataError(f"{int((~np.isfinite(reps)).sum())} bootstrap resamples of the {len(idx)} "
                        f"{spec.split!r} rows at {site.key} have no spread (PR 0/0); use more "
                        "examples (a larger split)")
    return Measurement(
        metric="participation ratio", estimate=value, resamples=reps, n=int(len(idx)),
        unit=f"{spec.split} examples",
        method=f"covariance participation ratio (sum l)^2 / sum l^2 at {where} (Gao et al. 2017)",
        details={"site": site.key, "d": int(X.shape[1])},
    )
