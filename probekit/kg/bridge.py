"""Bridge-entity analysis of two-hop composition (Wang et al. 2024, arXiv 2405.15071).

A two-hop query ``(h, r1, r2) -> t`` composes ``b = r1(h)`` (the *bridge* entity) and
``t = r2(b)``. Wang et al. find a staged circuit in grokked transformers: lower layers recall the
first hop, so ``b`` becomes decodable at the ``r1`` position near mid-depth; upper layers recall
the second hop at the last position. OOD queries (both hops are facts only ever trained as
one-hop queries) fail because the second hop is not stored in the upper layers.

Two measurements (Wang et al. 2024, section 5; guide: ``docs/circuits.md``):

* logit lens (final norm + unembedding of each block's output): the rank of ``b`` at the ``r1``
  position and of ``t`` at the last position, per query and layer
  (:func:`bridge_entity_lens`);
* linear probes (multinomial logistic regression: probekit's own
  :class:`~probekit.probes.LogisticProbe`) trained on the ``r1`` activations of training
  queries to predict ``b``, scored on each group (:func:`bridge_entity_probe`): decodable, not
  only in the unembedding basis;
* causal tracing with a counterfactual query: the head entity is swapped for ``h'`` whose bridge
  and answer differ; each (layer, position) state of the original query is patched into the
  counterfactual run, and the normalised recovery of ``logit(t) - logit(t')`` says where the
  composition happens (:func:`bridge_entity_tracing`, built on
  :func:`~probekit.circuits.activation_patching`).

Everything works on token ids: ``facts`` maps ``(head token, relation token)`` to the tail token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..capture.batching import PaddingSide
from ..circuits.lens import logit_lens
from ..circuits.metrics import logit_diff
from ..circuits.patching import PatchingResult, activation_patching, as_token_lists
from ..errors import ConfigError, DataError
from ..models.protocol import HookedModel
from ..report.blocks import Block
from ..report.notebook import NotebookMixin

__all__ = [
    "BridgeEntityAnalysis",
    "BridgeEntityLens",
    "BridgeProbeResult",
    "bridge_entity_analysis",
    "bridge_entity_lens",
    "bridge_entity_probe",
    "bridge_entity_tracing",
    "counterfactual_queries",
]


@dataclass(frozen=True, repr=False)
class BridgeEntityLens(NotebookMixin):
    """Logit-lens ranks of the bridge (at ``position``) and of the answer (at the last token).

    ``bridge_rank[q, l]`` is the rank (0 = top-1) of query ``q``'s bridge entity decoded from
    the output of block ``layers[l]`` at ``position``; ``answer_rank`` the same for the answer
    at the query's last token (the model's own prediction at the last layer).
    """

    bridge_rank: Int[Tensor, "query layer"]
    bridge_prob: Float[Tensor, "query layer"]
    answer_rank: Int[Tensor, "query layer"]
    layers: list[int]
    position: int
    processing: dict[str, object]

    def bridge_top_k(self, k: int = 1) -> Float[Tensor, " layer"]:
        """Share of queries whose bridge ranks in the top ``k`` at each layer."""
        return (self.bridge_rank < k).double().mean(0)

    def answer_top_k(self, k: int = 1) -> Float[Tensor, " layer"]:
        """Share of queries whose answer ranks in the top ``k`` at each layer (last = accuracy)."""
        return (self.answer_rank < k).double().mean(0)

    def bridge_mrr(self) -> Float[Tensor, " layer"]:
        """Mean reciprocal rank of the bridge per layer (Wang et al.'s logit-lens summary)."""
        return (1.0 / (self.bridge_rank.double() + 1)).mean(0)

    def to_records(self) -> list[dict[str, Any]]:
        """Per block: bridge top-1 rate, MRR and median rank; answer top-1 rate and median rank."""
        from .blocks import bridge_lens_records

        return bridge_lens_records(self)

    def _blocks(self) -> tuple[Block, ...]:
        from ..report.blocks import Column, Table
        from .blocks import bridge_lens_plot

        table = Table(columns=(
            Column(key="layer", header="block", fmt="d"),
            Column(key="bridge_top1", header="bridge top-1 rate"),
            Column(key="bridge_mrr", header="bridge MRR"),
            Column(key="bridge_median_rank", header="bridge median rank", fmt=".0f"),
            Column(key="answer_top1", header="answer top-1 rate"),
            Column(key="answer_median_rank", header="answer median rank", fmt=".0f"),
        ), rows=tuple(self.to_records()))
        return (bridge_lens_plot(self), table)

    def _summary(self) -> str:
        b1 = self.bridge_top_k(1)
        best = int(b1.argmax())
        return (f"{self.bridge_rank.shape[0]} queries, {len(self.layers)} blocks; bridge top-1 "
                f"peaks at block {self.layers[best]} ({float(b1[best]):.3f}), answer top-1 at "
                f"the last block {float(self.answer_top_k(1)[-1]):.3f}")


def _ids(values: Tensor | Sequence[int], n: int, what: str, d_vocab: int) -> Tensor:
    t = torch.as_tensor(values).long().reshape(-1)
    if t.shape[0] != n:
        raise DataError(f"{what} has {t.shape[0]} entries for {n} queries; give one token id per query")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= d_vocab):
        raise DataError(f"{what} holds a token id outside 0..{d_vocab - 1}")
    return t


def bridge_entity_lens(
    model: HookedModel,
    queries: Tensor | Sequence[Sequence[int]],
    bridges: Tensor | Sequence[int],
    answers: Tensor | Sequence[int],
    *,
    position: int = 1,
    padding_side: PaddingSide = "right",
) -> BridgeEntityLens:
    """Rank of each query's bridge at ``position`` and answer at its last token, per block output.

    ``queries`` are the prompt tokens ``[h, r1, r2]`` (any length > ``position``); ``bridges``
    and ``answers`` one token id each. Uses :func:`~probekit.circuits.logit_lens` (one forward).
    """
    toks = as_token_lists(queries, "queries")
    n, d_vocab = len(toks), int(model.cfg.d_vocab)
    b = _ids(bridges, n, "bridges", d_vocab)
    a = _ids(answers, n, "answers", d_vocab)
    short = [i for i, t in enumerate(toks) if len(t) <= position]
    if position < 0 or short:
        raise DataError(
            f"position {position} is not inside query {short[0] if short else 0} "
            f"(length {len(toks[short[0]]) if short else '?'}); give 0 <= position < query length"
        )
    lens = logit_lens(model, toks, torch.stack([b, a], 1), padding_side=padding_side)
    rows = torch.arange(n)
    last = torch.tensor([len(t) - 1 for t in toks])
    return BridgeEntityLens(
        bridge_rank=lens.rank[:, :, position, 0].clone(),
        bridge_prob=lens.prob[:, :, position, 0].clone(),
        answer_rank=lens.rank[rows, :, last, 1].clone(),
        layers=lens.layers, position=position, processing=lens.processing,
    )


@dataclass(frozen=True, repr=False)
class BridgeProbeResult(NotebookMixin):
    """Accuracy of a per-layer linear bridge probe on each query group.

    ``accuracy[group][l]`` is the share of the group's queries whose bridge the probe trained on
    block ``layers[l]``'s output at ``position`` predicts (top-1); ``train_accuracy`` the same on
    the training queries; ``correct[group]`` the per-query hits ``(query, layer)``;
    ``n_classes`` the bridges seen in training (queries whose bridge was never seen count as
    errors).
    """

    accuracy: dict[str, list[float]]
    correct: dict[str, np.ndarray]
    train_accuracy: list[float]
    layers: list[int]
    position: int
    n_train: int
    n_classes: int

    def to_records(self) -> list[dict[str, Any]]:
        """Per block: training accuracy and ``accuracy_<group>`` for each query group."""
        from .blocks import bridge_probe_records

        return bridge_probe_records(self)

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import bridge_probe_blocks

        return tuple(bridge_probe_blocks(self))

    def _summary(self) -> str:
        acc = ", ".join(f"{g} {max(v):.3f}" for g, v in self.accuracy.items())
        return (f"{len(self.layers)} blocks at position {self.position}, {self.n_train} training "
                f"queries, {self.n_classes} bridges; best accuracy {acc}")


def bridge_entity_probe(
    model: HookedModel,
    train_queries: Sequence[Sequence[int]],
    train_bridges: Sequence[int],
    queries: Mapping[str, Sequence[Sequence[int]]],
    bridges: Mapping[str, Sequence[int]],
    *,
    position: int = 1,
    layers: Sequence[int] | None = None,
    c: float = 1.0,
    batch_size: int = 512,
) -> BridgeProbeResult:
    """Fit a logistic probe for the bridge at ``position`` per block output; score every group.

    :class:`probekit.probes.LogisticProbe` with a fixed ``C = c``: multinomial L2 logistic
    regression on the standardised ``resid_post`` activations of ``train_queries`` (labels
    ``train_bridges``), read with :func:`probekit.capture.collect_activations` at token
    ``position``. Its objective ``sum_i CE_i + ||W||^2 / (2c)`` on the standardised features is
    scikit-learn's ``make_pipeline(StandardScaler(), LogisticRegression(C=c))``, strictly
    convex, solved to ``max |grad| <= 1e-5`` on the mean loss (sklearn's default stops at
    ``1e-4``, which can end short of the optimum). ``tests/kg/test_bridge.py`` checks the
    per-query hits against sklearn's pipeline solved to convergence; on the shipped ``kg_bridge``
    claims the accuracies equal the earlier sklearn probe's.

    Under causal attention the state at ``position`` depends only on the prefix up to it, so a
    training query sharing its ``(h, r1)`` prefix with an evaluated one has the *same*
    activation there; such training queries are dropped (``n_train`` counts the rest), so the
    scores measure decoding of unseen ``(h, r1)`` prefixes.
    """
    from ..capture import collect_activations
    from ..capture.positions import TokenIndex
    from ..probes.logistic import LogisticProbe
    from ..sites import Site

    if set(queries) != set(bridges):
        raise ConfigError(f"queries and bridges name different groups ({sorted(queries)}, "
                          f"{sorted(bridges)}); give the same keys to both")
    n_layers = int(model.cfg.n_layers)
    layer_list = list(range(n_layers)) if layers is None else [int(x) for x in layers]
    if any(not 0 <= x < n_layers for x in layer_list):
        raise ConfigError(f"layers {layer_list} out of range; the model has {n_layers} layers")
    y_train = np.asarray(list(train_bridges), dtype=np.int64)
    if y_train.size != len(train_queries) or np.unique(y_train).size < 2:
        raise DataError(f"{y_train.size} train bridges for {len(train_queries)} train queries with "
                        f"{np.unique(y_train).size} classes; give one bridge per query, >= 2 classes")
    held = {tuple(q[: position + 1]) for g in queries for q in queries[g]}
    keep = [i for i, q in enumerate(train_queries) if tuple(q[: position + 1]) not in held]
    train_queries = [train_queries[i] for i in keep]
    y_train = y_train[keep]
    if np.unique(y_train).size < 2:
        raise DataError("fewer than 2 bridge classes remain after dropping training queries that "
                        "share a prefix with an evaluated query; give more training queries")
    sites = [Site(x, "resid_post") for x in layer_list]

    def acts(toks: Sequence[Sequence[int]]) -> dict:
        tl = as_token_lists(toks, "queries")
        short = [i for i, t in enumerate(tl) if len(t) <= position]
        if short:
            raise DataError(f"position {position} is not inside query {short[0]} (length "
                            f"{len(tl[short[0]])}); give 0 <= position < query length")
        res = collect_activations(model, tl, sites, positions=TokenIndex([position] * len(tl)),
                                  batch_size=batch_size, progress=False)
        return {s: res.acts[s].double().numpy() for s in sites}

    x_train = acts(train_queries)
    x_groups = {g: acts(q) for g, q in queries.items()}
    y_groups = {g: np.asarray(list(bridges[g]), dtype=np.int64) for g in queries}
    correct = {g: np.zeros((len(queries[g]), len(sites)), dtype=bool) for g in queries}
    train_acc = []
    for li, s in enumerate(sites):
        probe = LogisticProbe(C=c, max_iter=1000).fit(x_train[s], y_train)
        train_acc.append(float(probe.score(x_train[s], y_train)))
        for g in queries:
            correct[g][:, li] = probe.predict(x_groups[g][s]) == y_groups[g]
    accuracy = {g: [float(x) for x in v.mean(0)] for g, v in correct.items()}
    return BridgeProbeResult(accuracy=accuracy, correct=correct, train_accuracy=train_acc,
                             layers=layer_list,
                             position=position, n_train=int(y_train.size),
                             n_classes=int(np.unique(y_train).size))


def counterfactual_queries(
    queries: Sequence[Sequence[int]],
    facts: Mapping[tuple[int, int], int],
    *,
    seed: int = 0,
) -> list[list[int] | None]:
    """For each ``[h, r1, r2]``, a query ``[h', r1, r2]`` whose bridge and answer both differ.

    ``facts[(h, r)] = t`` in token ids. Candidates ``h'`` need facts ``(h', r1) -> b'`` with
    ``b' != b`` and ``(b', r2) -> t'`` with ``t' != t``; one is drawn uniformly (``seed``).
    ``None`` where no candidate exists (or the query's own hops are not in ``facts``).
    """
    rng = np.random.default_rng(seed)
    by_relation: dict[int, list[int]] = {}
    for h, r in sorted(facts):
        by_relation.setdefault(r, []).append(h)
    out: list[list[int] | None] = []
    for q in queries:
        if len(q) != 3:
            raise DataError(f"query {list(q)} is not [h, r1, r2]; composition queries have 3 tokens")
        h, r1, r2 = (int(x) for x in q)
        b = facts.get((h, r1))
        t = None if b is None else facts.get((b, r2))
        if t is None:
            out.append(None)
            continue
        options = [
            h2 for h2 in by_relation.get(r1, [])
            if facts[(h2, r1)] != b and facts.get((facts[(h2, r1)], r2), t) != t
        ]
        out.append(None if not options else [int(options[rng.integers(len(options))]), r1, r2])
    return out


def bridge_entity_tracing(
    model: HookedModel,
    queries: Sequence[Sequence[int]],
    counterfactuals: Sequence[Sequence[int]],
    answers: Tensor | Sequence[int],
    counterfactual_answers: Tensor | Sequence[int],
    *,
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
    padding_side: PaddingSide = "right",
) -> PatchingResult:
    """Causal tracing of composition: restore each (layer, position) of the query into its counterfactual.

    Denoising :func:`~probekit.circuits.activation_patching` of ``resid_post`` by (layer,
    position) with metric ``logit(t) - logit(t')``; ``normalized`` = fraction of the query's
    logit difference that the single restored state brings back (Wang et al. 2024, sec. 5;
    Meng et al. 2022).
    """
    toks = as_token_lists(queries, "queries")
    d_vocab = int(model.cfg.d_vocab)
    a = _ids(answers, len(toks), "answers", d_vocab)
    f = _ids(counterfactual_answers, len(toks), "counterfactual_answers", d_vocab)
    if bool((a == f).any()):
        i = int(torch.nonzero(a == f)[0, 0])
        raise DataError(
            f"query {i}: the counterfactual has the same answer ({int(a[i])}); pick h' with a "
            "different answer (counterfactual_queries does)"
        )
    metric = partial(logit_diff, answer=a, foil=f)
    return activation_patching(model, toks, counterfactuals, metric, kind="resid_post",
                               by=("layer", "pos"), layers=layers, batch_size=batch_size,
                               padding_side=padding_side)


@dataclass(frozen=True, repr=False)
class BridgeEntityAnalysis(NotebookMixin):
    """Bridge-entity logit lens and causal tracing per query group (e.g. ``"id"``, ``"ood"``).

    ``lens[group]`` holds the per-layer ranks; ``tracing[group]`` the causal-tracing grid over
    the group's queries that have a counterfactual (absent when ``facts`` was not given or no
    query had one); ``accuracy[group]`` the model's top-1 answer accuracy.
    """

    lens: dict[str, BridgeEntityLens]
    tracing: dict[str, PatchingResult]
    accuracy: dict[str, float]

    def summary(self, k: int = 1) -> dict[str, dict[str, list[float]]]:
        """Per group: bridge top-``k`` rate, bridge MRR and answer top-``k`` rate per layer."""
        return {
            g: {"layers": [float(x) for x in r.layers],
                "bridge_top_k": r.bridge_top_k(k).tolist(), "bridge_mrr": r.bridge_mrr().tolist(),
                "answer_top_k": r.answer_top_k(k).tolist()}
            for g, r in self.lens.items()
        }

    def to_records(self) -> list[dict[str, Any]]:
        """Per query group and block: bridge top-1 rate, MRR, median rank; answer rates."""
        from .blocks import bridge_analysis_records

        return bridge_analysis_records(self)

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import bridge_analysis_blocks

        return tuple(bridge_analysis_blocks(self))

    def _summary(self) -> str:
        acc = ", ".join(f"{g} {a:.3f}" for g, a in self.accuracy.items())
        traced = f"; traced: {', '.join(self.tracing)}" if self.tracing else ""
        return f"{len(self.lens)} query groups; answer accuracy {acc}{traced}"


def bridge_entity_analysis(
    model: HookedModel,
    queries: Mapping[str, Sequence[Sequence[int]]],
    bridges: Mapping[str, Sequence[int]],
    answers: Mapping[str, Sequence[int]],
    *,
    facts: Mapping[tuple[int, int], int] | None = None,
    position: int = 1,
    max_traced: int = 64,
    seed: int = 0,
    batch_size: int = 64,
) -> BridgeEntityAnalysis:
    """Logit lens of the bridge and answer, and causal tracing, for each group of queries.

    ``queries[g]``, ``bridges[g]``, ``answers[g]``: token ids of group ``g`` (e.g. ``"id"`` and
    ``"ood"`` test queries). With ``facts`` (``(head, relation) -> tail`` token ids), up to
    ``max_traced`` queries per group get a counterfactual (:func:`counterfactual_queries`) and
    a causal-tracing grid (:func:`bridge_entity_tracing`).
    """
    if set(queries) != set(bridges) or set(queries) != set(answers):
        raise ConfigError(
            f"queries, bridges and answers name different groups ({sorted(queries)}, "
            f"{sorted(bridges)}, {sorted(answers)}); give the same keys to all three"
        )
    if max_traced < 1:
        raise ConfigError(f"max_traced must be >= 1, got {max_traced}")
    lens, tracing, accuracy = {}, {}, {}
    for g in queries:
        lens[g] = bridge_entity_lens(model, queries[g], bridges[g], answers[g], position=position)
        accuracy[g] = float(lens[g].answer_top_k(1)[-1])
        if facts is None:
            continue
        cf = counterfactual_queries(queries[g], facts, seed=seed)
        keep = [i for i, c in enumerate(cf) if c is not None][:max_traced]
        if not keep:
            continue
        cf_toks = [cf[i] for i in keep]
        cf_answers = [facts[(facts[(c[0], c[1])], c[2])] for c in cf_toks]
        tracing[g] = bridge_entity_tracing(
            model, [list(queries[g][i]) for i in keep], cf_toks,
            [int(answers[g][i]) for i in keep], cf_answers, batch_size=batch_size,
        )
    return BridgeEntityAnalysis(lens=lens, tracing=tracing, accuracy=accuracy)
