"""``measure = "representational_similarity"``: CKA between two sites (Kornblith et al. 2019)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ...util.constraints import Validated
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class RepresentationalSimilaritySpec(Validated):
    """Keys of a ``representational_similarity`` claim.

    ``site_a``, ``site_b``: the two sites (activations at ``[capture] positions`` of the
    ``split`` examples); ``kernel``: ``"linear"`` or ``"rbf"`` CKA; ``debiased``: the unbiased
    HSIC estimator (Nguyen et al. 2021).
    """

    site_a: str
    site_b: str
    split: str = "test"
    kernel: Literal["linear", "rbf"] = "linear"
    debiased: bool = False


#: the name before issue 58 (two classes were called ``SimilaritySpec``); kept for old imports
SimilaritySpec = RepresentationalSimilaritySpec


@register_measurement("representational_similarity", spec=RepresentationalSimilaritySpec, control=True)
def representational_similarity(spec: RepresentationalSimilaritySpec, ctx: Context, *, control: bool = False) -> Measurement:
    """CKA of the two sites over examples (:func:`probekit.similarity.cka`), bootstrapped over examples.

    Control: CKA after shuffling the rows of ``site_b`` (``[stats] n_permutations`` times), the
    permutation null of "no shared structure across examples".
    """
    import numpy as np

    from ...similarity import cka
    from ...sites import Site
    from ...stats.bootstrap import bootstrap_indices

    a, b = Site.parse(spec.site_a), Site.parse(spec.site_b)
    acts = ctx.activations([a, b])
    idx = ctx.examples.split(spec.split)
    X = acts[a].double().cpu().numpy()[idx]
    Y = acts[b].double().cpu().numpy()[idx]

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        return cka(x, y, spec.kernel, spec.debiased)

    boot = bootstrap_indices(len(idx), ctx.stats.n_bootstrap, ctx.stats.seed)
    reps = np.array([stat(X[r], Y[r]) for r in boot])
    null = None
    if control:
        rng = np.random.default_rng(ctx.stats.seed)
        null = np.array([stat(X, Y[rng.permutation(len(idx))])
                         for _ in range(ctx.stats.n_permutations)])
    return Measurement(
        metric=f"{'debiased ' if spec.debiased else ''}{spec.kernel} CKA", estimate=stat(X, Y),
        resamples=reps, null=null, n=len(idx), unit=f"{spec.split} examples",
        method=f"CKA between {a.key} and {b.key} over {len(idx)} {spec.split} examples "
        "(bootstrap over examples)",
    )
