"""``measure = "patching_effect"``: normalised denoising effect of patching one cell (Meng et al. 2022).

:func:`probekit.circuits.activation_patching` on the claim's prompt pairs
(:func:`probekit.circuits.patch_pairs`), the cell's effect normalised by
:func:`probekit.circuits.patch_effect.normalised_effect`.
"""

from __future__ import annotations

from ...context import Context
from ..keys import PatchingEffectSpec, patch_cell_effect
from ..measurement import Measurement
from ..registry import register_measurement

__all__ = ["PatchingEffectSpec", "patching_effect"]


@register_measurement("patching_effect", spec=PatchingEffectSpec, control=True)
def patching_effect(spec: PatchingEffectSpec, ctx: Context, *, control: bool = False) -> Measurement:
    """``sum_p (m_patched - m_corrupt) / sum_p (m_clean - m_corrupt)`` over prompt pairs.

    ``m`` = logit(clean answer) - logit(corrupt answer) at the last token; the clean
    activation at (site, position) — at every block of the window — is patched into the
    corrupted run
    (:func:`probekit.circuits.activation_patching`, denoising). The ratio of sums is
    bootstrapped over pairs; per-pair values (scaled by the mean clean-corrupt gap) pair with the
    control cell's for ``greater_than_control``.
    """
    from ...circuits import activation_patching, patch_pairs

    clean, corrupt, metric, clean_idx = patch_pairs(spec, ctx)
    res = activation_patching(ctx.model, clean, corrupt, metric, kind=spec.site_kind,
                              by=("layer", "pos"), layers=[spec.layer], window=spec.window,
                              batch_size=spec.batch_size)
    return patch_cell_effect(spec, ctx, res, clean, clean_idx, control=control,
                             how="denoising patch")
