"""``[[homomorphism]]``: modifier and sequence homomorphism error per layer (An & Du 2026).

Reads the whole inputs of a SCAN-style split (``[data] prompt_only = false``) with their parse
columns, captures every block's states in one pass (:func:`probekit.homomorphism.measure_he`;
all tokens, so not the context's one-row-per-example store) and reports, per layer and
composition kind, [C]'s HE (mean over operator families of held-out MSE, bootstrap CI) and the
normalised ``1 - R^2`` (ours). ``parts = "separate"`` ([O]) reads the parts from separate
forward passes (:mod:`probekit.homomorphism.separate`) with one operator per modifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from ...context import RunContext
from ...homomorphism.config import HEConfig
from ...sites import site_label
from ...util.constraints import Distinct, NonEmpty
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class HomomorphismSpec(HEConfig):
    """``[[homomorphism]]`` keys: :class:`~probekit.homomorphism.HEConfig`'s options plus ``kinds``.

    Every HE option (families, solver, alpha, parts, pooling, site, layer, train_fraction,
    shuffle, seed, n_resamples, confidence_level, batch_size; defaults = the authors' choices
    [C]) is a key, declared and validated once in :class:`HEConfig`. ``split`` names the
    examples whose inputs give the pairs ([C]: the training inputs); ``max_examples`` is not a
    key (``[data] max_per_split`` bounds the split).

    Attributes:
        kinds: ``modifier`` (primitive + adjacent modifier) and/or ``sequence`` (``then``).
    """

    kinds: Annotated[tuple[Literal["modifier", "sequence"], ...], NonEmpty(), Distinct()] = (
        "modifier", "sequence")
    max_examples: int | None = field(default=None, init=False)


@register_analysis("homomorphism", spec=HomomorphismSpec)
def run_homomorphism(spec: HomomorphismSpec, ctx: RunContext) -> AnalysisResult:
    """Modifier / sequence HE per layer with bootstrap CIs (An & Du 2026)."""
    from ...homomorphism import measure_he
    from ...homomorphism.blocks import he_blocks
    from ...sites import Site
    from ...util.constraints import base_config

    layers, results = measure_he(ctx, spec.split, tuple(spec.kinds), base_config(spec, HEConfig))
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
