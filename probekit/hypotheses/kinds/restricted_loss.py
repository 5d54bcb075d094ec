"""``restricted_loss`` / ``excluded_loss``: loss of the key-frequency logits (Nanda et al. 2023, §5.1).

On a probekit checkpoint of the ``modular_addition`` testbed (the ``[model]`` one, or
``checkpoint = "DIR"``; train / held-out pairs from its recorded task config):
:func:`probekit.grokking.progress_stats.ablation_loss`, one value per pair of ``split``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ..keys import checkpoint_model
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class LogitAblationSpec:
    """Keys of a ``restricted_loss`` / ``excluded_loss`` claim.

    ``checkpoint``: a checkpoint directory (default: ``[model]``); ``keys``: the key frequencies
    (default: the ``n_keys`` with the most sum-direction power in this checkpoint's logits);
    ``split``: ``"all"`` pairs, ``"train"`` or ``"test"`` (held-out); ``path``: ``"neuron"``
    (Nanda et al.: project the MLP activations at ``=`` onto the key frequencies, times
    ``W_out W_U``, plus the mean logits) or ``"logits"`` (project the full logits, so the
    attention / direct paths' key components count too).
    """

    checkpoint: str | None = None
    keys: tuple[int, ...] | None = None
    n_keys: int = 5
    split: Literal["all", "train", "test"] = "all"
    path: Literal["neuron", "logits"] = "neuron"


def _ablation(spec: LogitAblationSpec, ctx: Context, which: Literal["restricted", "excluded"]) -> Measurement:
    from ...grokking.modadd_checkpoints import train_mask
    from ...grokking.progress_measures import modular_logit_grid
    from ...grokking.progress_stats import ablation_loss

    model, path = checkpoint_model(ctx, spec.checkpoint)
    mask = train_mask(path)
    res = ablation_loss(model, modular_logit_grid(model, mask.shape[0]), mask, which=which,
                        keys=spec.keys, n_keys=spec.n_keys, split=spec.split, path=spec.path)
    what = "neuron path" if spec.path == "neuron" else "full logits"
    return Measurement(
        metric=f"{which} loss", values=res.loss, unit=f"{spec.split} pairs",
        method=f"cross-entropy of the {which} logits ({what}; key frequencies {list(res.keys)}; "
        f"Nanda et al. 2023) over {res.loss.size} {spec.split} pairs; full-logit loss "
        f"{res.full_loss:.4g}",
        details={"keys": list(res.keys), "path": spec.path, "full_loss": res.full_loss},
    )


@register_measurement("restricted_loss", spec=LogitAblationSpec,
                      needs_testbed="the modular-addition logit grid of a probekit checkpoint")
def restricted_loss(spec: LogitAblationSpec, ctx: Context) -> Measurement:
    """Loss of the logits restricted to the constant + key sum directions (per pair)."""
    return _ablation(spec, ctx, "restricted")


@register_measurement("excluded_loss", spec=LogitAblationSpec,
                      needs_testbed="the modular-addition logit grid of a probekit checkpoint")
def excluded_loss(spec: LogitAblationSpec, ctx: Context) -> Measurement:
    """Loss of the logits with the key sum directions removed (per pair; Nanda: train split)."""
    return _ablation(spec, ctx, "excluded")
