"""Steering a site along a direction or a set of units: the ops behind ``necessity`` steering.

Activation addition (ActAdd, Turner et al. 2023, "Activation Addition: Steering Language Models
Without Optimization") adds a fixed vector to a site's activations at every selected position.
Inference-time intervention (ITI, Li et al. 2023) steers along a probe direction ``u`` with a
step measured in the standard deviation ``sigma`` of the activations' projection onto it. The
ops built here follow that reading; every selected cell ``v`` (default: every real token) gets

    direction:  v' = v + alpha * sigma * u / ||u||
    units:      v'_i = v_i + alpha * sigma_i     for each steered unit i (others unchanged)

``alpha`` (``strength``) is in standard deviations and may be negative (steering the other way);
``alpha = 0`` is the identity. Both are :class:`~probekit.interventions.Add` ops, so they go
through the same hooks as every other intervention and are removed after the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float

from ..capture.positions import AllTokens
from ..errors import ConfigError, DataError
from ..shapes import shape_checked
from ..sites import Site
from .ops import Add, Positions

__all__ = ["direction_steering", "unit_steering"]


def _check_strength(strength: float) -> float:
    if isinstance(strength, bool) or not isinstance(strength, int | float) or not math.isfinite(strength):
        raise ConfigError(f"steering strength must be a finite number (in standard deviations), got {strength!r}")
    return float(strength)


@shape_checked
def direction_steering(
    site: Site,
    direction: Float[np.ndarray, " d"],
    *,
    strength: float,
    sigma: float = 1.0,
    positions: Positions | None = None,
) -> Add:
    """The op adding ``strength * sigma * direction / ||direction||`` at ``site`` (module doc).

    Args:
        site: the site (its last axis has ``d`` entries).
        direction: ``(d,)`` finite, non-zero; only its direction is used.
        strength: ``alpha``, in units of ``sigma`` (finite; 0 is the identity).
        sigma: the step's scale, e.g. the std of the projection onto the direction (finite, >= 0).
        positions: where (default every real token).
    """
    alpha = _check_strength(strength)
    u = np.asarray(direction, dtype=np.float64)
    if u.ndim != 1 or u.size == 0 or not np.isfinite(u).all() or not np.linalg.norm(u) > 0:
        raise DataError(f"steering direction must be a finite non-zero (d,) vector, got shape {u.shape}")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ConfigError(f"steering sigma must be a finite number >= 0, got {sigma!r}")
    vector = torch.as_tensor(u / np.linalg.norm(u) * float(sigma))
    return Add(site=site, vector=vector, scale=alpha, positions=positions if positions is not None else AllTokens())


@shape_checked
def unit_steering(
    site: Site,
    units: Sequence[int],
    sigma: Float[np.ndarray, " d"],
    *,
    strength: float,
    positions: Positions | None = None,
) -> Add:
    """The op adding ``strength * sigma[i]`` to unit ``i`` of ``site``'s last axis, for ``i`` in ``units``.

    ``sigma``: ``(d,)`` per-unit scales over the whole last axis (e.g. each unit's std over
    reference activations); only the ``units`` entries are written.
    """
    alpha = _check_strength(strength)
    s = np.asarray(sigma, dtype=np.float64)
    chosen = tuple(int(i) for i in units)
    if s.ndim != 1 or not np.isfinite(s).all() or (s < 0).any():
        raise DataError(f"unit steering sigma must be a finite (d,) vector >= 0, got shape {s.shape}")
    if not chosen or len(set(chosen)) != len(chosen) or min(chosen) < 0 or max(chosen) >= s.size:
        raise ConfigError(f"steered units must be distinct indices in 0..{s.size - 1}, got {list(chosen)}")
    return Add(site=site, vector=torch.as_tensor(s), scale=alpha, features=chosen,
               positions=positions if positions is not None else AllTokens())
