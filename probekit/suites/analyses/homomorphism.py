"""``[[homomorphism]]``: modifier and sequence homomorphism error per layer (An & Du 2026).

Reads the whole inputs of a SCAN-style split (``[data] prompt_only = false``) with their parse
columns, captures every block's states in one pass (:func:`probekit.homomorphism.measure_he`;
all tokens, so not the context's one-row-per-example store) and reports, per layer and
composition kind, [C]'s HE (mean over operator families of held-out MSE, bootstrap CI) and the
normalised ``1 - R^2`` (ours). ``parts = "separate"`` ([O]) reads the parts from separate
forward passes (:mod:`probekit.homomorphism.separate`) with one operator per modifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import RunContext
from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class HomomorphismSpec:
    """``[[homomorphism]]`` keys (defaults = the authors' choices [C]).

    Attributes:
        split: examples whose inputs give the pairs ([C]: the training inputs).
        kinds: ``modifier`` (primitive + adjacent modifier) and/or ``sequence`` (``then``).
        families: operator families averaged into HE.
        solver: ``adam`` ([C]'s 50-epoch fit, default) or ``closed_form_ridge`` (exact least
            squares for affine/bilinear: 0 by construction for [C]'s linear target).
        parts: ``same_pass`` ([C]) or ``separate`` ([O]: parts from separate forward passes,
            one operator per modifier; pair with ``families = ["affine"]``,
            ``solver = "closed_form_ridge"`` and read the ``1 - R^2`` column).
        pooling: span pooling, ``mean`` [C] or ``last``.
        site: hook kind read at every block.
        train_fraction, shuffle, seed: operator fit/score split and seeds.
    """

    split: str = "train"
    kinds: tuple[Literal["modifier", "sequence"], ...] = ("modifier", "sequence")
    families: tuple[Literal["affine", "bilinear", "mlp"], ...] = ("affine", "bilinear", "mlp")
    solver: Literal["adam", "closed_form_ridge"] = "adam"
    parts: Literal["same_pass", "separate"] = "same_pass"
    pooling: Literal["mean", "last"] = "mean"
    site: str = "resid_post"
    train_fraction: float = 0.8
    shuffle: bool = False
    seed: int = 0


@register_analysis("homomorphism", spec=HomomorphismSpec)
def run_homomorphism(spec: HomomorphismSpec, ctx: RunContext) -> AnalysisResult:
    """Modifier / sequence HE per layer with bootstrap CIs (An & Du 2026)."""
    from ...homomorphism import HEConfig, measure_he
    from ...homomorphism.blocks import he_blocks
    from ...sites import Site

    cfg = HEConfig(
        families=tuple(spec.families), solver=spec.solver, parts=spec.parts,
        pooling=spec.pooling, site=spec.site, train_fraction=spec.train_fraction,
        shuffle=spec.shuffle, seed=spec.seed,
    )
    layers, results = measure_he(ctx, spec.split, tuple(spec.kinds), cfg)
    ctx.forward_passes += 1
    labels = [site_label(Site(layer, spec.site)) for layer in layers]
    blocks = tuple(he_blocks(results, labels, split=spec.split))
    return AnalysisResult(
        section="homomorphism",
        title="Homomorphism error (An & Du 2026)" + (
            "" if spec.parts == "same_pass" else ", parts from separate passes [O]"),
        data={k: r.to_dict() for k, r in results.items()},
        blocks=blocks,
    )
