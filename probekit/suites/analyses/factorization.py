"""``[[factorization]]``: per-site concept factorization of two label columns (Uselis et al. 2026).

Compositional generalization requires representations that factor linearly and orthogonally
into the concepts (Uselis, Dittadi & Oh, arXiv 2602.24264). For each captured site this section
reports, on the rows of ``split`` (the fitted combinations):

* the least-squares additive fit ``z(a, b) ~ mu + u_a + v_b`` over combination means, its R^2 on
  the fitted combinations and on the unseen combinations of ``heldout_split`` (linearity that
  transfers), the principal angles between the spans of ``u`` and ``v`` (orthogonality) and each
  factor's numerical rank (:func:`probekit.geometry.concept_factorization`);
* the scores of the paper's released code on the same rows: linear-factorization R^2 of the
  summed concept-value means (raw and PCA-whitened), k95 rank of each concept's means, and the
  mean ``|cos|`` between value means of the same and of different concepts
  (:func:`probekit.geometry.concept_means_scores`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...context import RunContext
from ...errors import ConfigError
from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class FactorizationSpec:
    """``[[factorization]]`` keys.

    Attributes:
        concept_a: column of the first concept (e.g. the first operand).
        concept_b: column of the second concept.
        split: rows whose (a, b) combinations are fitted and scored by the paper's code.
        heldout_split: rows whose combinations unseen in ``split`` give the held-out R^2
            (``""``: none).
        rtol: relative singular-value threshold of the per-concept rank.
    """

    concept_a: str
    concept_b: str
    split: str = "train"
    heldout_split: str = "test"
    rtol: float = 1e-3


def _site_scores(stack: Any, a: np.ndarray, b: np.ndarray, train: np.ndarray, rtol: float
                 ) -> tuple[list[dict[str, float | None]], int, int]:
    """Both families of scores for a ``(site, n, d)`` stack; per-site dicts and combo counts."""
    import torch

    from ...geometry import concept_factorization, concept_means_scores

    fac = concept_factorization(stack, a, b, train=train, rtol=rtol)
    fit = np.flatnonzero(train)
    ref = concept_means_scores(stack[:, fit], [a[fit], b[fit]])
    out = []
    for i in range(stack.shape[0]):
        angles = fac.principal_angles[i]
        angles = angles[~torch.isnan(angles)]
        held = float(fac.r2_heldout[i])
        out.append({
            "r2_train": float(fac.r2_train[i]),
            "r2_heldout": held if np.isfinite(held) else None,
            "angle_min": float(angles.min()) if angles.numel() else None,
            "angle_mean": float(angles.mean()) if angles.numel() else None,
            "rank_a": int(fac.rank_a[i]), "rank_b": int(fac.rank_b[i]),
            "linear_r2": float(ref.linear_r2[i]),
            "linear_r2_whitened": float(ref.linear_r2_whitened[i]),
            "k95_a": int(ref.k95[i, 0]), "k95_b": int(ref.k95[i, 1]),
            "same_concept_abs_cos": float(ref.same_concept_abs_cos[i]),
            "cross_concept_abs_cos": float(ref.cross_concept_abs_cos[i]),
            "principal_angles": [float(v) for v in angles],
        })
    return out, fac.n_train_combinations, fac.n_heldout_combinations


@register_analysis("factorization", spec=FactorizationSpec)
def run_factorization(spec: FactorizationSpec, ctx: RunContext) -> AnalysisResult:
    """Concept factorization per site: additive fit, held-out R^2, angles, ranks (Uselis et al.)."""
    import torch

    from ...geometry.blocks import FACTORIZATION_MEASURES as MEASURES
    from ...geometry.blocks import factorization_blocks

    if spec.concept_a == spec.concept_b:
        raise ConfigError(
            f"[[factorization]] concept_a and concept_b are both {spec.concept_a!r}; name two "
            "different columns"
        )
    fit_rows = ctx.examples.split(spec.split)
    held_rows = (ctx.examples.split(spec.heldout_split) if spec.heldout_split
                 else np.zeros(0, dtype=np.int64))
    rows = np.concatenate([fit_rows, held_rows]).astype(np.int64)
    train = np.arange(rows.size) < fit_rows.size
    a = np.asarray(ctx.examples.column(spec.concept_a), dtype=object)[rows].astype(str)
    b = np.asarray(ctx.examples.column(spec.concept_b), dtype=object)[rows].astype(str)
    for key, vals in ((spec.concept_a, a[train]), (spec.concept_b, b[train])):
        if np.unique(vals).size < 2:
            raise ConfigError(
                f"[[factorization]] column {key!r} takes {np.unique(vals).size} value(s) in split "
                f"{spec.split!r}; a concept needs at least 2 values"
            )
    acts = ctx.activations()
    sites = list(acts)
    sel = torch.from_numpy(rows)
    fit_sel = torch.from_numpy(fit_rows.astype(np.int64))
    flat = [s for s in sites if float(acts[s][fit_sel].to(torch.float64).var(dim=0).sum()) == 0.0]
    blank = {k: None for k, _, _ in MEASURES} | {"principal_angles": []}
    scores: dict[Any, dict[str, Any]] = {s: dict(blank) for s in flat}
    by_dim: dict[int, list[Any]] = {}
    for s in sites:
        if s not in flat:
            by_dim.setdefault(acts[s].shape[1], []).append(s)
    n_fit = n_held = 0
    for group in by_dim.values():  # sites of equal width are one (site, n, d) stack
        stack = torch.stack([acts[s][sel].to(torch.float64) for s in group])
        per_site, n_fit, n_held = _site_scores(stack, a, b, train, spec.rtol)
        scores.update(zip(group, per_site))
    if not by_dim:
        raise ConfigError(
            f"[[factorization]] every site is constant over the {spec.split!r} rows: nothing to "
            "factorize; capture sites after attention"
        )
    labels = [site_label(s) for s in sites]
    warnings = []
    if flat:
        warnings.append(f"sites {[site_label(s) for s in flat]} are identical for every row: "
                        "no factorization, left blank")
    if spec.heldout_split and n_held == 0:
        warnings.append(f"split {spec.heldout_split!r} has no (a, b) combination unseen in "
                        f"{spec.split!r}: the held-out R2 is blank")
    data = {
        "concept_a": spec.concept_a, "concept_b": spec.concept_b, "split": spec.split,
        "heldout_split": spec.heldout_split, "n_fitted_combinations": n_fit,
        "n_heldout_combinations": n_held, "n_values": [int(np.unique(a[train]).size),
                                                       int(np.unique(b[train]).size)],
        "sites": [s.name for s in sites], "site_labels": labels,
        **{k: [scores[s][k] for s in sites] for k, _, _ in MEASURES},
        "principal_angles": [scores[s]["principal_angles"] for s in sites],
    }
    blocks = tuple(factorization_blocks(
        labels, {k: [scores[s][k] for s in sites] for k, _, _ in MEASURES},
        text=(
            f"Concepts {spec.concept_a!r} x {spec.concept_b!r} "
            f"({data['n_values'][0]} x {data['n_values'][1]} values): additive model "
            f"z(a, b) ~ mu + u_a + v_b fitted on the {n_fit} combinations of split "
            f"{spec.split!r}, scored on {n_held} combinations of {spec.heldout_split!r} never "
            "seen in the fit; orthogonality = principal angles between span(u) and span(v) "
            "(90 deg: orthogonal). Dashed: the scores of Uselis et al.'s released code on the "
            "fitted rows (summed concept-value means, k95 ranks, |cos| of value means)."
        ),
    ))
    return AnalysisResult(
        section="factorization",
        title=f"Concept factorization of {spec.concept_a!r} x {spec.concept_b!r}",
        data=data, blocks=blocks, warnings=tuple(warnings),
    )
