"""``measure = "participation_ratio"``: effective dimension of a site's activations (Gao et al. 2017).

``PR = (sum_i l_i)^2 / sum_i l_i^2`` over the eigenvalues ``l_i`` of the activation covariance
(:func:`probekit.geometry.participation_ratio`): 1 when the points lie on a line, ``d`` when
they fill ``d`` dimensions isotropically. One of the baselines of Chou et al. (ICLR 2026) for
predicting OOD success from representational geometry.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import label_name, labels, site_rows
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


@register_measurement("participation_ratio", spec=ParticipationRatioSpec)
def participation_ratio(spec: ParticipationRatioSpec, ctx: Context) -> Measurement:
    """Participation ratio of the activation covariance at ``site``.

    Pooled: the PR of all ``split`` rows, bootstrapped over rows
    (:func:`probekit.geometry.participation_bootstrap.pr_resamples`). ``per_class``: one PR
    per class (the units), their mean and its bootstrap over classes.
    """
    from ...geometry import participation_ratio as pr
    from ...geometry import participation_ratio_per_class
    from ...geometry.participation_bootstrap import pr_resamples

    site, X = site_rows(ctx, spec.site, spec.split)
    n = X.shape[0]
    where = f"{site.key} ({spec.split}, {n} rows, d = {X.shape[1]})"
    if spec.per_class:
        y = labels(ctx, spec.label)[ctx.examples.split(spec.split)]
        per = participation_ratio_per_class(X, y)[0].numpy()
        return Measurement(
            metric="participation ratio (class mean)", values=per, unit="classes",
            method=f"mean over {per.size} classes of {label_name(ctx, spec.label)!r} of the "
            f"covariance participation ratio (sum l)^2 / sum l^2 at {where} (Gao et al. 2017)",
            details={"site": site.key, "per_class": per.tolist()},
        )
    reps = pr_resamples(X.numpy(), n_bootstrap=ctx.stats.n_bootstrap, seed=ctx.stats.seed,
                        what=f"{spec.split!r} rows at {site.key}")
    return Measurement(
        metric="participation ratio", estimate=float(pr(X)[0]), resamples=reps, n=int(n),
        unit=f"{spec.split} examples",
        method=f"covariance participation ratio (sum l)^2 / sum l^2 at {where} (Gao et al. 2017)",
        details={"site": site.key, "d": int(X.shape[1])},
    )
