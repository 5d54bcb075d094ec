"""Per-unit relation statistics: the "expertise" of Liu et al. (2025) and companions.

For every unit i of every captured site and every relation r (positives = prompts of r,
negatives = prompts of all other relations):

- ``ap[i, r]``: average precision of the unit's response (Liu et al. 2025, "On Relation-Specific
  Neurons in Large Language Models", EMNLP; the statistic of Suau et al.'s ml-selfcond);
- ``auroc[i, r]``: one-vs-rest AUROC of the response;
- ``act_prob[i, r]``: the fraction of r's prompts on which the response is > 0;
- ``mean[i, r]``: the mean response on r's prompts.

The response of a unit to a prompt is its activation averaged over all prompt tokens
(``response="mean"``, the lineage code's reading) or at the last token (``"last"``, ours).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..capture import LastToken, SpanMean, capture_to_store
from ..errors import ConfigError, DataError, NonFiniteError
from ..report.blocks import Block, Column, Table
from ..report.notebook import NotebookMixin
from ..sites import Site, as_sites
from .ranking import one_vs_rest

RESPONSES = ("mean", "last")


@dataclass(frozen=True, repr=False)
class NeuronStatistics(NotebookMixin):
    """Per-site ``(unit, relation)`` tables of AP, AUROC, activation probability and mean response.

    Attributes:
        sites: the captured sites, in order.
        relations: relation names; column ``r`` of every table is ``relations[r]``.
        n_prompts: number of prompts per relation.
        response: ``"mean"`` (over prompt tokens) or ``"last"`` (last token).
        ap, auroc, act_prob, mean: ``{site: Float[Tensor, "unit relation"]}``.
    """

    sites: tuple[Site, ...]
    relations: tuple[str, ...]
    n_prompts: tuple[int, ...]
    response: str
    ap: Mapping[Site, Tensor]
    auroc: Mapping[Site, Tensor]
    act_prob: Mapping[Site, Tensor]
    mean: Mapping[Site, Tensor]

    def relation_index(self, relation: str) -> int:
        """Column of ``relation`` in every table; unknown names list the known ones."""
        if relation not in self.relations:
            raise ConfigError(f"unknown relation {relation!r}; known: {list(self.relations)}")
        return self.relations.index(relation)

    @property
    def n_units(self) -> int:
        """Total number of candidate units over all sites."""
        return sum(int(t.shape[0]) for t in self.ap.values())

    def chance_ap(self, relation: str) -> float:
        """AP of a random ranking for ``relation``: its share of the prompts."""
        return self.n_prompts[self.relation_index(relation)] / sum(self.n_prompts)

    def max_ap_by_layer(self) -> tuple[list[int], Tensor]:
        """Layers and the ``(relation, layer)`` maximum AP over every site of each layer."""
        layers = sorted({s.layer for s in self.sites if s.layer is not None})
        best = torch.stack([
            torch.stack([self.ap[s].max(0).values for s in self.sites if s.layer == layer]).amax(0)
            for layer in layers
        ], 1)
        return layers, best

    def to_records(self) -> list[dict[str, Any]]:
        """One row per site and relation: units, max and mean AP, chance AP, the best unit."""
        out = []
        for s in self.sites:
            ap = self.ap[s]
            for j, r in enumerate(self.relations):
                best = int(ap[:, j].argmax())
                out.append({
                    "site": s.name, "layer": s.layer, "relation": r, "n_units": int(ap.shape[0]),
                    "max_ap": float(ap[best, j]), "mean_ap": float(ap[:, j].mean()),
                    "chance_ap": self.chance_ap(r), "best_unit": best,
                    "best_unit_auroc": float(self.auroc[s][best, j]),
                })
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from ..sites import site_label
        from .blocks import ap_by_layer_plot

        table = Table(
            title=f"Most relation-specific unit per site ({self.response} response)",
            columns=(Column(key="site", header="site", fmt="", align="left"),
                     Column(key="relation", header="relation", fmt="", align="left"),
                     Column(key="n_units", header="units", fmt="d"),
                     Column(key="max_ap", header="max AP"),
                     Column(key="mean_ap", header="mean AP"),
                     Column(key="chance_ap", header="chance AP"),
                     Column(key="best_unit", header="best unit", fmt="d"),
                     Column(key="best_unit_auroc", header="its AUROC")),
            rows=tuple(dict(r, site=site_label(r["site"])) for r in self.to_records()),
        )
        has_layers = any(s.layer is not None for s in self.sites)
        return (ap_by_layer_plot(self), table) if has_layers else (table,)

    def _summary(self) -> str:
        return (f"{len(self.sites)} sites, {self.n_units} units, {len(self.relations)} relations "
                f"({sum(self.n_prompts)} prompts, {self.response} response)")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary (per site and relation: max AP, mean AP; no per-unit tables)."""
        return {
            "relations": list(self.relations),
            "n_prompts": list(self.n_prompts),
            "response": self.response,
            "sites": {
                str(s): {
                    "n_units": int(self.ap[s].shape[0]),
                    "max_ap": [float(v) for v in self.ap[s].max(0).values],
                    "mean_ap": [float(v) for v in self.ap[s].mean(0)],
                }
                for s in self.sites
            },
        }


def encode_relations(relation_ids: Sequence[object]) -> tuple[tuple[str, ...], np.ndarray]:
    """Relation names in first-seen order and each prompt's integer code."""
    names: list[str] = []
    codes = np.empty(len(relation_ids), dtype=np.int64)
    for i, rel in enumerate(relation_ids):
        if rel is None or (isinstance(rel, float) and not np.isfinite(rel)):
            raise DataError(f"prompt {i} has no relation id ({rel!r}); give every prompt one")
        name = str(rel)
        if name not in names:
            names.append(name)
        codes[i] = names.index(name)
    counts = np.bincount(codes, minlength=len(names))
    if len(names) < 2:
        raise DataError(
            f"found {len(names)} relation ({names}); expertise compares a relation with the "
            "others, so pass prompts of at least 2 relations"
        )
    small = [f"{names[r]!r} ({counts[r]})" for r in range(len(names)) if counts[r] < 2]
    if small:
        raise DataError(
            f"relations with fewer than 2 prompts: {', '.join(small)}; add facts or drop them"
        )
    return tuple(names), codes


def statistics_from_responses(
    responses: Mapping[Site, Float[Tensor, "prompt unit"]],
    relation_ids: Sequence[object],
    *,
    response: str = "mean",
) -> NeuronStatistics:
    """Compute :class:`NeuronStatistics` from per-prompt responses (one row per prompt).

    Exact (no histogram): one sort per unit column. Computed in float64.
    """
    return _statistics(responses.items(), relation_ids, response)


def _statistics(
    site_responses: Iterable[tuple[Site, Tensor]], relation_ids: Sequence[object], response: str
) -> NeuronStatistics:
    """Statistics site by site; ``site_responses`` may load each site only when it is reached."""
    relations, codes = encode_relations(relation_ids)
    codes_t = torch.from_numpy(codes)
    onehot = torch.nn.functional.one_hot(codes_t, len(relations)).to(torch.float64)
    counts = onehot.sum(0)
    ap: dict[Site, Tensor] = {}
    auroc: dict[Site, Tensor] = {}
    act_prob: dict[Site, Tensor] = {}
    mean: dict[Site, Tensor] = {}
    for site, values in site_responses:
        if values.ndim != 2 or values.shape[0] != len(codes):
            raise DataError(
                f"{site}: responses of shape {tuple(values.shape)} for {len(codes)} prompts; "
                "expected (n_prompts, n_units)"
            )
        x = values.to(torch.float64)
        if not torch.isfinite(x).all():
            rows = torch.nonzero(~torch.isfinite(x).all(1)).flatten()[:5].tolist()
            raise NonFiniteError(f"{site}: non-finite responses at prompts {rows}")
        mean[site] = (x.T @ onehot) / counts
        act_prob[site] = ((x > 0).to(torch.float64).T @ onehot) / counts
        ap[site], auroc[site] = one_vs_rest(x, codes_t, len(relations))
    return NeuronStatistics(
        sites=tuple(ap),
        relations=relations,
        n_prompts=tuple(int(c) for c in counts.tolist()),
        response=response,
        ap=ap,
        auroc=auroc,
        act_prob=act_prob,
        mean=mean,
    )


def neuron_statistics(
    model: object,
    prompts: Sequence[Sequence[int]],
    relation_ids: Sequence[object],
    sites: Sequence[Site | str],
    *,
    response: str = "mean",
    store_dir: str | Path | None = None,
    batch_size: int = 16,
    padding_side: str = "right",
) -> NeuronStatistics:
    """One streaming pass over a fact set, then exact per-unit statistics for every site.

    The responses (one row per prompt and site) stream into an activation store shard by shard
    (``store_dir``, resumable; a temporary directory by default), so peak memory is one shard of
    rows during the forward passes and ``prompts x units`` of one site while ranking, never
    ``tokens x units``. Results do not depend on ``batch_size`` or ``padding_side``.
    """
    if response not in RESPONSES:
        raise ConfigError(f"unknown response {response!r}; use one of {list(RESPONSES)}")
    if len(prompts) != len(relation_ids):
        raise DataError(
            f"{len(prompts)} prompts but {len(relation_ids)} relation ids; pass one id per prompt"
        )
    encode_relations(relation_ids)  # fail before running the model
    site_list = as_sites(sites)
    rule = SpanMean([(0, len(p)) for p in prompts]) if response == "mean" else LastToken()
    with tempfile.TemporaryDirectory(prefix="probekit-neurons-") as tmp:
        directory = Path(store_dir) if store_dir is not None else Path(tmp) / "store"
        store = capture_to_store(
            model,
            prompts,
            directory,
            site_list,
            positions=rule,
            batch_size=batch_size,
            padding_side=padding_side,
            examples_per_shard=256,  # bounds the rows held before a shard is written
        )
        order = np.argsort(store.examples().numpy(), kind="stable")  # back to prompt order
        return _statistics(
            ((site, torch.as_tensor(np.asarray(store.load(site)))[order]) for site in site_list),
            relation_ids,
            response,
        )
