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
from typing import Annotated

import numpy as np

from ...context import RunContext
from ...errors import ConfigError
from ...sites import site_label
from ...util.constraints import Between, NonEmpty, Validated
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class FactorizationSpec(Validated):
    """``[[factorization]]`` keys.

    Attributes:
        concept_a: column of the first concept (e.g. the first operand).
        concept_b: column of the second concept.
        split: rows whose (a, b) combinations are fitted and scored by the paper's code.
        heldout_split: rows whose combinations unseen in ``split`` give the held-out R^2
            (``""``: none).
        rtol: relative singular-value threshold of the per-concept rank.
    """

    concept_a: Annotated[str, NonEmpty(hint="a column name")]
    concept_b: Annotated[str, NonEmpty(hint="a column name")]
    split: Annotated[str, NonEmpty(hint="a split name")] = "train"
    heldout_split: str = "test"
    rtol: Annotated[float, Between(0, 1, hint="a relative singular-value threshold")] = 1e-3


@register_analysis("factorization", spec=FactorizationSpec)
def run_factorization(spec: FactorizationSpec, ctx: RunContext) -> AnalysisResult:
    """Concept factorization per site: additive fit, held-out R^2, angles, ranks (Uselis et al.)."""
    from ...geometry import site_factorization
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
    fac = site_factorization(ctx.activations(), rows, train, a, b, rtol=spec.rtol, split=spec.split)
    n_fit, n_held = fac.n_fitted_combinations, fac.n_heldout_combinations
    warnings = list(fac.warnings)
    if spec.heldout_split and n_held == 0:
        warnings.append(f"split {spec.heldout_split!r} has no (a, b) combination unseen in "
                        f"{spec.split!r}: the held-out R2 is blank")
    labels = [site_label(s) for s in fac.sites]
    n_values = [int(np.unique(a[train]).size), int(np.unique(b[train]).size)]
    data = {
        "concept_a": spec.concept_a, "concept_b": spec.concept_b, "split": spec.split,
        "heldout_split": spec.heldout_split, "n_fitted_combinations": n_fit,
        "n_heldout_combinations": n_held, "n_values": n_values,
        "sites": [s.name for s in fac.sites], "site_labels": labels, **fac.values,
    }
    text = (f"Concepts {spec.concept_a!r} x {spec.concept_b!r} ({n_values[0]} x {n_values[1]} "
            f"values): additive model z(a, b) ~ mu + u_a + v_b fitted on the {n_fit} combinations "
            f"of split {spec.split!r}, scored on {n_held} combinations of {spec.heldout_split!r} "
            "never seen in the fit; orthogonality = principal angles between span(u) and span(v) "
            "(90 deg: orthogonal). Dashed: the scores of Uselis et al.'s released code on the "
            "fitted rows (summed concept-value means, k95 ranks, |cos| of value means).")
    return AnalysisResult(
        section="factorization",
        title=f"Concept factorization of {spec.concept_a!r} x {spec.concept_b!r}",
        data=data, blocks=tuple(factorization_blocks(
            labels, {k: v for k, v in fac.values.items() if k != "principal_angles"}, text=text)),
        warnings=tuple(warnings),
    )
