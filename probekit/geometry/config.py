"""Frozen configuration of a class-manifold measurement (MFTMA: Chung, Lee & Sompolinsky 2018).

:class:`ManifoldConfig` is the one declaration of which class manifolds are measured and of the
mean-field options: the ``[[geometry]]`` suite section
(:class:`probekit.suites.analyses.geometry.GeometrySpec`) and the ``manifold_capacity``,
``manifold_radius`` and ``manifold_dimension`` claim and diagnosis-marker kinds subclass it, so
an option added here is a key of all of those files, validated by its declared rule
(:mod:`probekit.util.constraints`). Importing this module does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..util.constraints import SEED, Finite, Ge, Validated


@dataclass(frozen=True, kw_only=True)
class ManifoldConfig(Validated):
    """Which class manifolds, and the mean-field capacity options.

    Attributes:
        label: the column whose classes are the manifolds (``None``: the file's ``[data] label``).
        split: examples measured (``train``, ``test`` or an OOD split).
        max_points: points per class manifold, subsampled with ``seed`` (Chou et al.: 50).
        n_t: Gaussian samples per manifold.
        kappa: the margin.
        seed: the point subsample, the Gaussian samples and the restarts.
    """

    label: str | None = None
    split: str = "train"
    max_points: Annotated[int | None, Ge(2)] = 50
    n_t: Annotated[int, Ge(2)] = 200
    kappa: Annotated[float, Finite()] = 0.0
    seed: Annotated[int, SEED] = 0
