"""The normalised effect of a patch over prompt pairs, as a ratio of sums with its bootstrap.

With ``m`` the metric (e.g. the logit difference of the clean against the corrupted answer) on
the corrupted run (``m_corrupt``), the clean run (``m_clean``) and the patched / circuit run
(``m_patched``), the normalised effect over pairs ``p`` is (Meng et al. 2022; Wang et al. 2022)::

    effect = sum_p (m_patched - m_corrupt) / sum_p (m_clean - m_corrupt)

1 when the patch restores the clean metric, 0 when it does nothing. Its bootstrap resamples the
pairs (Efron & Tibshirani 1993: a ratio of resampled sums); per-pair values are the gains over
the *mean* gap, so they average to the effect over the same pairs and pair with a control
patch's values for a paired test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

from ..errors import DataError

__all__ = ["NormalisedEffect", "normalised_effect"]


@dataclass(frozen=True, kw_only=True)
class NormalisedEffect:
    """The effect over pairs, per-pair values, the bootstrap and the control's values.

    Attributes:
        estimate: ``sum (m_patched - m_corrupt) / sum (m_clean - m_corrupt)``.
        values: ``(pair,)`` ``(m_patched - m_corrupt) / mean(m_clean - m_corrupt)``.
        resamples: ``(B,)`` the ratio of sums over resampled pairs.
        control: ``(pair,)`` the control patch's values (same scale), or None.
    """

    estimate: float
    values: np.ndarray
    resamples: np.ndarray
    control: np.ndarray | None = None


def normalised_effect(
    patched: Float[np.ndarray, " pair"], corrupt: Float[np.ndarray, " pair"],
    clean: Float[np.ndarray, " pair"], *, n_bootstrap: int, seed: int,
    control: Float[np.ndarray, " pair"] | None = None, what: str = "normalised patching effect",
) -> NormalisedEffect:
    """Normalised effect of ``patched`` between ``corrupt`` (0) and ``clean`` (1), over pairs.

    ``control``: the metric under a control patch (e.g. the same patch at another position).
    Raises :class:`~probekit.errors.DataError` when the clean and corrupted runs have the same
    mean metric (``what`` names the undefined quantity).
    """
    from ..stats.bootstrap import bootstrap_indices

    gain, gap = patched - corrupt, clean - corrupt
    if not abs(gap.mean()) > 0:
        raise DataError(f"clean and corrupted runs have the same mean logit difference; the "
                        f"{what} is undefined (choose contrasting pairs)")
    boot = bootstrap_indices(len(gain), n_bootstrap, seed)
    return NormalisedEffect(
        estimate=float(gain.sum() / gap.sum()), values=gain / gap.mean(),
        resamples=gain[boot].sum(1) / gap[boot].sum(1),
        control=None if control is None else (control - corrupt) / gap.mean(),
    )
