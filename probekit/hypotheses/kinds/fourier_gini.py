"""``fourier_gini``: sparsity of the Fourier components of the weights (Nanda et al. 2023, §5.1).

:func:`probekit.grokking.progress_stats.fourier_gini_resamples` on a modular-addition checkpoint
(the ``[model]`` one, or ``checkpoint = "DIR"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ..keys import checkpoint_model
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class FourierGiniSpec:
    """Keys of a ``fourier_gini`` claim: ``source`` ``"embed"`` (``W_E``) or ``"neuron_logit"``."""

    source: Literal["embed", "neuron_logit"] = "embed"
    checkpoint: str | None = None


@register_measurement("fourier_gini", spec=FourierGiniSpec,
                      needs_testbed="the Fourier key frequencies of a modular-addition checkpoint")
def fourier_gini(spec: FourierGiniSpec, ctx: Context) -> Measurement:
    """Gini of the ``p`` Fourier-component norms; norms recomputed on resampled dimensions."""
    from ...grokking.modadd_checkpoints import train_mask
    from ...grokking.progress_stats import fourier_gini_resamples

    model, path = checkpoint_model(ctx, spec.checkpoint)
    p = train_mask(path).shape[0]
    res = fourier_gini_resamples(model, p, source=spec.source, n_bootstrap=ctx.stats.n_bootstrap,
                                 seed=ctx.stats.seed)
    return Measurement(
        metric=f"Gini of {spec.source} Fourier norms", estimate=res.estimate,
        resamples=res.resamples, n=res.n,
        unit="embedding dimensions" if spec.source == "embed" else "MLP neurons",
        method=f"Gini (Hurley & Rickard 2009) of the {p} Fourier-component L2 norms of "
        f"{'W_E' if spec.source == 'embed' else 'W_L = W_out W_U'} (Nanda et al. 2023 §5.1)",
    )
