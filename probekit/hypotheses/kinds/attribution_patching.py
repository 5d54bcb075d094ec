"""``measure = "attribution_patching"``: gradient estimate of a patching effect (Nanda 2023; Syed et al. 2023)."""

from __future__ import annotations

from ...context import Context
from ..keys import PatchingEffectSpec, patch_cell_effect
from ..measurement import Measurement
from ..registry import register_measurement


@register_measurement("attribution_patching", spec=PatchingEffectSpec, control=True)
def attribution_patching(spec: PatchingEffectSpec, ctx: Context, *, control: bool = False) -> Measurement:
    """Normalised effect of a cell estimated by attribution patching (keys as ``patching_effect``).

    ``m_patched ~ m_corrupt + (a_clean - a_corrupt) . dm/da`` at the corrupted run, all cells
    from one forward + one backward (:func:`probekit.circuits.attribution_patching`); then the
    ratio of sums over pairs as for ``patching_effect`` (``batch_size`` unused, ``window`` 1).
    """
    from ...circuits import attribution_patching as estimate
    from ...circuits import patch_pairs
    from ...errors import ConfigError

    if spec.window != 1:
        raise ConfigError(f"window = {spec.window}: attribution patching estimates one block per "
                          "cell; use window = 1 (or measure = \"patching_effect\" for a window)")
    clean, corrupt, metric, clean_idx = patch_pairs(spec, ctx)
    res = estimate(ctx.model, clean, corrupt, metric, kind=spec.site_kind, by=("layer", "pos"),
                   layers=[spec.layer])
    return patch_cell_effect(spec, ctx, res, clean, clean_idx, control=control,
                             how="attribution patching (linear estimate of the denoising patch)")
