"""``measure = "circuit_faithfulness"``: how much of the metric a top-k edge circuit keeps.

Edges scored by EAP / EAP-IG (Syed et al. 2023; Hanna et al. 2024,
:func:`probekit.circuits.edge_attribution`), the top ``k`` kept, every other edge ablated
(:func:`probekit.circuits.faithfulness_curve`); the estimate is the normalised logit difference
of :func:`probekit.circuits.patch_effect.normalised_effect`, the circuit selected on the same
pairs it is evaluated on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ...context import Context
from ...util.constraints import Distinct, Each, Ge, Validated
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class CircuitFaithfulnessSpec(Validated):
    """Keys of a ``circuit_faithfulness`` claim (data: clean/corrupt rows paired by ``pair_column``).

    ``k``: edges kept; ``method``: ``"eap"`` or ``"eap-ig"`` (``steps`` interpolation steps,
    the paper's 5); ``ablation``: what edges outside the circuit carry (``"patch"``: the
    corrupted prompt's activation, ``"mean"``: its mean over corrupted tokens); ``curve``: extra
    edge counts plotted as a faithfulness curve under the claim; ``answer_column``: each row's
    answer (token id, or text whose first token is used).
    """

    k: Annotated[int, Ge(1, hint="edges kept")]
    method: Literal["eap", "eap-ig"] = "eap-ig"
    steps: Annotated[int, Ge(1)] = 5
    ablation: Literal["patch", "mean"] = "patch"
    curve: Annotated[tuple[int, ...], Each(Ge(1)), Distinct()] = ()
    answer_column: str = "answer"
    pair_column: str = "pair_id"
    role_column: str = "role"
    batch_size: Annotated[int, Ge(1)] = 32


@register_measurement("circuit_faithfulness", spec=CircuitFaithfulnessSpec)
def circuit_faithfulness(spec: CircuitFaithfulnessSpec, ctx: Context) -> Measurement:
    """Normalised metric of the top-``k`` edge circuit, per pair and as a ratio of sums."""
    from ...circuits import edge_attribution, faithfulness_curve, patch_pairs
    from ...circuits.blocks import faithfulness_plot
    from ...circuits.patch_effect import normalised_effect
    from ...errors import ConfigError

    if spec.k < 0 or any(k < 0 for k in spec.curve):
        raise ConfigError(f"k={spec.k}, curve={list(spec.curve)}: edge counts must be >= 0")
    clean, corrupt, metric, _ = patch_pairs(spec, ctx)
    scores = edge_attribution(ctx.model, clean, corrupt, metric, method=spec.method,
                              steps=spec.steps, batch_size=spec.batch_size)
    ks = tuple(dict.fromkeys((spec.k, *sorted(spec.curve))))
    curve = faithfulness_curve(ctx.model, clean, corrupt, metric, scores, ks,
                               ablation=spec.ablation, batch_size=spec.batch_size)
    eff = normalised_effect(curve.per_pair[:, 0].double().numpy(), scores.corrupt.double().numpy(),
                            scores.clean.double().numpy(), n_bootstrap=ctx.stats.n_bootstrap,
                            seed=ctx.stats.seed, what="circuit's faithfulness")
    steps = f", {scores.steps} steps" if spec.method == "eap-ig" else ""
    return Measurement(
        metric="normalised logit difference", values=eff.values, estimate=eff.estimate,
        resamples=eff.resamples, n=len(eff.values), unit="prompt pairs",
        method=f"top {spec.k} of {scores.graph.n_edges} edges by {spec.method.upper()}{steps}, "
        f"others {spec.ablation}-ablated (clean logit diff {scores.clean.mean():.3f}, corrupt "
        f"{scores.corrupt.mean():.3f})",
        details={"curve": curve.to_dict(), "clean_logit_diff": scores.clean.tolist(),
                 "corrupt_logit_diff": scores.corrupt.tolist(),
                 "circuit_logit_diff": curve.per_pair[:, 0].tolist()},
        blocks=(faithfulness_plot(curve),) if len(ks) > 1 else (),
    )
