"""The key frequencies' share of Fourier power with its bootstrap over units (Nanda et al. 2023).

A modular-addition model represents residues by a few key frequencies (Nanda et al., "Progress
measures for grokking via mechanistic interpretability", ICLR 2023). Given the Fourier power
``P[u, f]`` of each unit ``u`` (an example's logits over the answers ``0..p-1``, or an embedding
dimension over the residue tokens; :func:`~probekit.grokking.fourier.frequency_power`), the keys
``S`` are the ``k`` strongest non-constant frequencies of ``sum_u P[u]`` and the share is
``sum_{f in S} sum_u P[u, f] / sum_{f > 0} sum_u P[u, f]``; its bootstrap resamples the units
with ``S`` held fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from .fourier import key_frequencies

__all__ = ["KeyShare", "key_share_resamples", "key_share_plot", "residue_logits"]


@dataclass(frozen=True, kw_only=True)
class KeyShare:
    """The key frequencies' share of the non-constant power, its resamples and the spectrum.

    Attributes:
        share: ``sum_S P / sum_{f>0} P`` over all units.
        resamples: ``(B,)`` the share over resampled units (keys fixed).
        keys: the ``k`` key frequencies, strongest first.
        power_share: ``(freq - 1,)`` each non-constant frequency's share of the power.
        n: number of units.
    """

    share: float
    resamples: np.ndarray
    keys: np.ndarray
    power_share: np.ndarray
    n: int


def residue_logits(
    model: Any, tokens: Sequence[Sequence[int]], p: int, *, batch_size: int = 512
) -> Float[np.ndarray, "n p"]:
    """Last-token logits over the residue answers ``0..p-1`` of each prompt (float64)."""
    import torch

    from ..interventions import run_with_interventions

    chunks = []
    with torch.no_grad():
        for lo in range(0, len(tokens), batch_size):
            out = run_with_interventions(model, tokens[lo: lo + batch_size], [], logits="last")
            chunks.append(out.output[:, :p].double().cpu())
    return torch.cat(chunks).numpy()


def key_share_resamples(
    units: Float[np.ndarray, "unit freq"], k: int, *, n_bootstrap: int, seed: int
) -> KeyShare:
    """Share of the ``k`` key frequencies in the power of ``units``, bootstrapped over units."""
    from ..stats.bootstrap import bootstrap_indices

    total = units.sum(0)
    keys = key_frequencies(total, k)
    boot = bootstrap_indices(units.shape[0], n_bootstrap, seed)
    counts = np.stack([np.bincount(b, minlength=units.shape[0]) for b in boot]).astype(np.float64)
    sums = counts @ units  # (B, freq)
    return KeyShare(share=float(total[keys].sum() / total[1:].sum()),
                    resamples=sums[:, keys].sum(1) / sums[:, 1:].sum(1), keys=keys,
                    power_share=total[1:] / total[1:].sum(), n=int(units.shape[0]))


def key_share_plot(res: KeyShare, *, source: str) -> Any:
    """Bar plot of each non-constant frequency's power share (the report block)."""
    from ..report.blocks import LinePlot, Series

    return LinePlot(
        title=f"Fourier power of the {source} by frequency (key: {sorted(res.keys.tolist())})",
        x_labels=tuple(str(f) for f in range(1, res.power_share.shape[0] + 1)),
        xlabel="frequency k", ylabel="share of non-constant power",
        series=(Series(name="power share", values=tuple(float(v) for v in res.power_share),
                       style="bar"),),
    )
