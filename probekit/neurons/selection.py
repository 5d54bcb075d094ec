"""Choose a relation's neurons from their AP ranking; overlaps between relations' sets.

Liu et al. (2025) keep the top-k units by average precision ("expertise") as relation r's
neurons; units of all candidate sites are ranked together. k is a count or a fraction of the
candidate units (the paper's reading is top-k only; the lineage's "both" top/bottom is not used).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError
from ..sites import Site
from .statistics import NeuronStatistics


@dataclass(frozen=True)
class NeuronSet:
    """A set of units: per site, the unit indices (sorted), plus the ranking they came from.

    Attributes:
        units: ``{site: LongTensor of unit indices}``; every site of the statistics is present.
        ranked: the chosen units as ``(site, unit, score)`` in decreasing score order.
        label: what the set is (e.g. ``"capital top-50"``).
    """

    units: Mapping[Site, Tensor]
    ranked: tuple[tuple[Site, int, float], ...]
    label: str

    def __len__(self) -> int:
        return sum(int(u.numel()) for u in self.units.values())

    def counts(self) -> dict[Site, int]:
        """Units per site (the per-layer, per-module counts random controls must match)."""
        return {s: int(u.numel()) for s, u in self.units.items()}

    def keys(self) -> set[tuple[Site, int]]:
        """The set as ``{(site, unit)}``."""
        return {(s, int(i)) for s, u in self.units.items() for i in u.tolist()}

    def top(self, n: int) -> NeuronSet:
        """The first ``n`` units of the ranking (cumulativity: 10/25/50/100% of the set)."""
        if not 0 <= n <= len(self.ranked):
            raise ConfigError(f"n={n} is outside 0..{len(self.ranked)} (the set's size)")
        return _from_ranked(self.ranked[:n], list(self.units), f"{self.label} first {n}")

    def nth(self, i: int) -> NeuronSet:
        """Only the ``i``-th unit of the ranking (single-neuron deactivation)."""
        if not 0 <= i < len(self.ranked):
            raise ConfigError(f"i={i} is outside 0..{len(self.ranked) - 1} (the set's ranks)")
        return _from_ranked(self.ranked[i : i + 1], list(self.units), f"{self.label} #{i + 1}")

    def at_mlp_post(self) -> NeuronSet:
        """The same MLP neurons read at ``mlp_post`` (``act(gate) * up``, width ``d_mlp``).

        Unit ``i`` of ``mlp_pre`` / ``mlp_pre_linear`` / ``mlp_post`` of a layer is the same
        neuron; gate and up unit ``i`` of one layer become one post unit (so the set can shrink).
        The ranking keeps each post unit's first (best) rank.
        """
        mlp = ("mlp_pre", "mlp_pre_linear", "mlp_post")
        bad = sorted({s.kind for s in self.units if s.kind not in mlp})
        if bad:
            raise ConfigError(f"at_mlp_post maps MLP units only; the set has sites of kinds {bad}")
        seen: set[tuple[Site, int]] = set()
        ranked = []
        for site, unit, score in self.ranked:
            key = (Site(site.layer, "mlp_post"), unit)
            if key not in seen:
                seen.add(key)
                ranked.append((*key, score))
        sites = list(dict.fromkeys(Site(s.layer, "mlp_post") for s in self.units))
        return _from_ranked(ranked, sites, f"{self.label} at mlp_post")


def _from_ranked(
    ranked: Sequence[tuple[Site, int, float]], sites: Sequence[Site], label: str
) -> NeuronSet:
    per_site: dict[Site, list[int]] = {s: [] for s in sites}
    for site, unit, _ in ranked:
        per_site[site].append(unit)
    units = {s: torch.tensor(sorted(u), dtype=torch.long) for s, u in per_site.items()}
    return NeuronSet(units=units, ranked=tuple(ranked), label=label)


def _resolve_k(stats: NeuronStatistics, k: int | None, fraction: float | None) -> int:
    n = stats.n_units
    if (k is None) == (fraction is None):
        raise ConfigError("give exactly one of k (a count) or fraction (of the candidate units)")
    if fraction is not None:
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"fraction={fraction} must be in (0, 1]")
        k = max(1, int(round(fraction * n)))
    k = int(k or 0)
    if not 1 <= k <= n:
        raise ConfigError(
            f"k={k} is larger than the {n} candidate units of {len(stats.sites)} sites; "
            f"choose k <= {n} or add sites"
        )
    return k


def select_neurons(
    stats: NeuronStatistics,
    relation: str,
    *,
    k: int | None = None,
    fraction: float | None = None,
    lowest: bool = False,
) -> NeuronSet:
    """The ``k`` units (or ``fraction`` of all candidates) with the highest AP for ``relation``.

    ``lowest=True`` returns the lowest-AP units instead (a control). Ties are broken by site
    order, then unit index, so the result is deterministic.
    """
    r = stats.relation_index(relation)
    k = _resolve_k(stats, k, fraction)
    scores = torch.cat([stats.ap[s][:, r] for s in stats.sites]).numpy()
    site_of = np.concatenate([np.full(stats.ap[s].shape[0], i) for i, s in enumerate(stats.sites)])
    unit_of = np.concatenate([np.arange(stats.ap[s].shape[0]) for s in stats.sites])
    key = scores if lowest else -scores
    order = np.lexsort((unit_of, site_of, key))[:k]
    ranked = [(stats.sites[site_of[i]], int(unit_of[i]), float(scores[i])) for i in order]
    which = "bottom" if lowest else "top"
    return _from_ranked(ranked, stats.sites, f"{relation} {which}-{k}")


def random_like(
    neuron_set: NeuronSet, sizes: Mapping[Site, int], *, seed: int
) -> NeuronSet:
    """A random unit set with the same number of units per site (layer and module) as ``neuron_set``.

    ``sizes`` gives each site's width. Seeded with ``numpy.random.default_rng(seed)``.
    """
    rng = np.random.default_rng(seed)
    ranked: list[tuple[Site, int, float]] = []
    for site, count in neuron_set.counts().items():
        if count > sizes[site]:
            raise ConfigError(f"{site}: {count} units requested but the site has {sizes[site]}")
        ranked.extend((site, int(u), 0.0) for u in rng.choice(sizes[site], count, replace=False))
    return _from_ranked(ranked, list(neuron_set.units), f"random like {neuron_set.label} #{seed}")


def jaccard_matrix(sets: Sequence[NeuronSet]) -> np.ndarray:
    """Pairwise Jaccard overlap |A & B| / |A | B| of unit sets (1 on the diagonal)."""
    keys = [s.keys() for s in sets]
    out = np.ones((len(sets), len(sets)))
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            if i != j:
                union = len(a | b)
                out[i, j] = len(a & b) / union if union else 1.0
    return out
