"""``restricted_loss_lead``: the restricted loss falls before the held-out loss (Nanda et al. 2023).

Over a checkpoint series of one modular-addition run: the step at which the held-out loss falls
to ``loss_threshold`` minus the step at which the restricted loss does (> 0: the restricted loss
falls first), :func:`probekit.grokking.progress_stats.restricted_loss_lead` on
:func:`probekit.grokking.progress_measures.progress_measures` (one executor task per checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ..keys import checkpoint_dir
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class RestrictedLeadSpec:
    """Keys of a ``restricted_loss_lead`` claim.

    ``checkpoints``: ``"run"`` (default: every checkpoint of the training run the ``[model]``
    checkpoint belongs to, e.g. a ``[model.train]`` run in the cache) or a glob of checkpoint
    directories (relative to the file) forming one training run; ``loss_threshold``: the loss
    (nats) whose first crossing defines each curve's drop (interpolated between checkpoints); ``keys`` / ``n_keys``: key frequencies
    (default: top ``n_keys`` of the last checkpoint, fixed over the series);
    ``restricted_split``: pairs the restricted loss averages over (default all; the authors'
    training-time curve uses the held-out pairs, ``"test"``); ``path``: ``"neuron"`` (Nanda et
    al.'s restricted loss, default) or ``"logits"`` (full-logit projection).
    """

    checkpoints: str = "run"
    loss_threshold: float = 1.0
    keys: tuple[int, ...] | None = None
    n_keys: int = 5
    restricted_split: Literal["all", "train", "test"] = "all"
    path: Literal["neuron", "logits"] = "neuron"


@register_measurement("restricted_loss_lead", spec=RestrictedLeadSpec,
                      needs_testbed="a modular-addition checkpoint series")
def restricted_loss_lead(spec: RestrictedLeadSpec, ctx: Context) -> Measurement:
    """Steps by which the restricted loss reaches ``loss_threshold`` before the held-out loss."""
    from ...grokking.blocks import progress_plots
    from ...grokking.modadd_checkpoints import checkpoint_series, run_series_pattern, train_mask
    from ...grokking.progress_measures import progress_measures
    from ...grokking.progress_stats import restricted_loss_lead as lead

    pattern = (run_series_pattern(checkpoint_dir(ctx, None)) if spec.checkpoints == "run"
               else ctx.suite.resolve(spec.checkpoints))
    dirs = checkpoint_series(pattern, key=f"checkpoints = {spec.checkpoints!r}")
    series = progress_measures(dirs, train_mask=train_mask(dirs[-1][1]), keys=spec.keys,
                               n_keys=spec.n_keys, restricted_split=spec.restricted_split,
                               path=spec.path, executor=ctx.executor)
    res = lead(series, threshold=spec.loss_threshold, n_bootstrap=ctx.stats.n_bootstrap,
               seed=ctx.stats.seed)
    steps, t = series.steps, spec.loss_threshold
    return Measurement(
        metric="lead (steps)", estimate=res.estimate, resamples=res.resamples, n=res.n,
        unit="pairs",
        method=f"restricted loss ({spec.path} path, {spec.restricted_split} pairs) reaches {t:g} at step "
        f"{res.restricted_step:.0f}, held-out loss at step {res.test_step:.0f}, over {len(steps)} checkpoints "
        f"(steps {steps[0]}..{steps[-1]}; Nanda et al. 2023 §5.1)",
        details={"restricted_step": res.restricted_step, "test_step": res.test_step,
                 **series.to_dict()},
        blocks=tuple(progress_plots(series, threshold=t)),
    )
