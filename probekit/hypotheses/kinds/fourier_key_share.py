"""``measure = "fourier_key_share"``: share of Fourier power in the top-k frequencies (Nanda et al. 2023)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class FourierKeyShareSpec:
    """Keys of a ``fourier_key_share`` claim.

    ``p``: the modulus (residue tokens ``0..p-1``); ``k``: number of key frequencies;
    ``source``: ``"logits"`` (last-token logits over the answers ``0..p-1`` of the ``split``
    examples, Fourier-transformed over the answer; units = examples) or ``"embedding"`` (rows
    ``0..p-1`` of ``W_E``, transformed over the token; units = embedding dimensions).
    """

    p: int
    k: int = 5
    source: Literal["logits", "embedding"] = "logits"
    split: str = "test"
    batch_size: int = 512


def _check_task(model: object) -> None:
    """NotApplicableError when the model is a checkpoint trained on a task other than modadd."""
    from ...errors import NotApplicableError
    from ...models.checkpoint import read_checkpoint_meta

    path = getattr(model, "probekit_checkpoint", None)
    task = None if path is None else read_checkpoint_meta(path).get("extra", {}).get("task")
    if task is not None and task != "modular_addition":
        raise NotApplicableError(f"fourier_key_share: {path} was trained on task {task!r}; the "
                                 "Fourier key frequencies are defined for modular addition only")


@register_measurement("fourier_key_share", spec=FourierKeyShareSpec)
def fourier_key_share(spec: FourierKeyShareSpec, ctx) -> Measurement:
    """Fraction of the non-constant Fourier power in the ``k`` strongest frequencies.

    The key frequencies are chosen on all units, then the share ``sum_keys P / sum_{f>0} P`` is
    bootstrapped over units (examples or embedding dimensions) with the keys held fixed.
    """
    import numpy as np
    import torch

    from ...circuits.fourier import frequency_power, key_frequencies
    from ...interventions import run_with_interventions
    from ...report.blocks import LinePlot, Series
    from ...stats.bootstrap import bootstrap_indices

    model = ctx.model
    _check_task(model)
    if spec.source == "embedding":
        w = model.W_E.detach().double().cpu().numpy()[: spec.p]  # (p, d)
        power = frequency_power(w, spec.p)  # (freq, d)
        units, unit = power.T, "embedding dimensions"
    else:
        idx = ctx.examples.split(spec.split)
        tokens = [ctx.examples.tokens[i] for i in idx]
        chunks = []
        with torch.no_grad():
            for lo in range(0, len(tokens), spec.batch_size):
                out = run_with_interventions(model, tokens[lo: lo + spec.batch_size], [], logits="last")
                chunks.append(out.output[:, : spec.p].double().cpu())
        logits = torch.cat(chunks).numpy()  # (n, p)
        units, unit = frequency_power(logits.T, spec.p).T, f"{spec.split} examples"  # (n, freq)
    total = units.sum(0)
    keys = key_frequencies(total, spec.k)
    share = float(total[keys].sum() / total[1:].sum())
    boot = bootstrap_indices(units.shape[0], ctx.stats.n_bootstrap, ctx.stats.seed)
    counts = np.stack([np.bincount(b, minlength=units.shape[0]) for b in boot]).astype(np.float64)
    sums = counts @ units  # (B, freq)
    resamples = sums[:, keys].sum(1) / sums[:, 1:].sum(1)
    frac = total[1:] / total[1:].sum()
    plot = LinePlot(
        title=f"Fourier power of the {spec.source} by frequency (key: {sorted(keys.tolist())})",
        x_labels=tuple(str(f) for f in range(1, total.shape[0])), xlabel="frequency k",
        ylabel="share of non-constant power",
        series=(Series(name="power share", values=tuple(float(v) for v in frac), style="bar"),),
    )
    return Measurement(
        metric=f"top-{spec.k} frequency share", estimate=share, resamples=resamples,
        n=int(units.shape[0]), unit=unit,
        method=f"Fourier power of the {spec.source} over residues 0..{spec.p - 1}; key "
        f"frequencies {keys.tolist()} chosen on all {units.shape[0]} {unit}, share bootstrapped "
        "over them",
        details={"key_frequencies": keys.tolist(), "power_share": frac.tolist(), "source": spec.source},
        blocks=(plot,),
    )
