"""Edge attribution patching: EAP (Syed et al. 2023) and EAP-IG (Hanna et al. 2024).

The model's computational graph (Hanna et al. 2024, ``hannamw/EAP-IG``): *upstream* nodes write
to the residual stream -- ``input`` (``resid_pre@0``: token + position embeddings), every
attention head ``aL.hH`` (its output ``z_H W_O^H``, bias excluded) and every MLP ``mL``;
*downstream* nodes read it -- each head's query input ``aL.hH<q>``, each key/value head's key and
value inputs ``aL.hG<k>``/``aL.hG<v>`` (grouped-query attention: one per KV head, named
``aL.kvG<k>``; the reference code ungroups them instead), each MLP's input ``mL`` and the
``logits``. An edge ``u -> v`` exists when ``u`` writes before ``v`` reads (heads of layer ``L``
feed the MLP of layer ``L``). A component's input is the sum of its upstream outputs (plus
constant biases), so patching one edge swaps one term of that sum.

EAP scores every edge from one clean forward + backward and one corrupted forward:
``score(u -> v) = sum_pos (a_u(corrupt) - a_u(clean)) . dm/d in_v |clean``, averaged over prompt
pairs: the first-order change of the metric when only that edge carries the corrupted
activation. EAP-IG (inputs) averages the gradient over ``steps`` inputs interpolated between the
corrupted and clean ``resid_pre@0``: ``alpha_k = k / steps``, ``k = 1..steps`` (the paper's
sum; ``steps = 1`` is EAP; the paper's default is 5).

A circuit is a set of edges; it is evaluated by running the clean prompts with every other edge
patched (each downstream input receives, for each edge *outside* the circuit, the corrupted -- or
mean -- activation of its upstream node instead of this run's), through
:class:`~probekit.interventions.Recompute` ops. Faithfulness is
``(m_circuit - m_corrupt) / (m_clean - m_corrupt)``. Everything goes through
:mod:`probekit.interventions` (``Read``, ``Grad``, ``Replace``, ``Recompute``); per-head inputs
on TL-native bridges are provided by the capture layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..capture.batching import PaddingSide
from ..errors import ConfigError, DataError
from ..interventions import Grad, Read, Recompute, Replace, run_with_interventions
from ..models.protocol import HookedModel
from ..progress import track
from ..report.blocks import Block, Column, Table, Text
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from ..sites import Site
from .metrics import as_pair_metric
from .patch_grid import check_token_limits
from .patching import Metric, as_token_lists, check_pairs, run_metric


@dataclass(frozen=True)
class EdgeGraph:
    """Upstream (writer) and downstream (reader) nodes and which edges exist.

    ``up_stage``/``down_stage`` order nodes in the forward pass (input 0, attention of layer
    ``L`` at ``2L + 1``, MLP of layer ``L`` at ``2L + 2``, logits last); ``mask[u, v]`` is True
    for a real edge (``up_stage[u] < down_stage[v]``).
    """

    upstream: tuple[str, ...]
    downstream: tuple[str, ...]
    up_stage: tuple[int, ...]
    down_stage: tuple[int, ...]
    n_layers: int
    n_heads: int
    n_kv_heads: int
    has_mlp: bool

    @property
    def mask(self) -> Bool[Tensor, "up down"]:
        """Real edges."""
        return torch.tensor(self.up_stage)[:, None] < torch.tensor(self.down_stage)[None, :]

    @property
    def n_edges(self) -> int:
        """Number of real edges."""
        return int(self.mask.sum())

    def edge_index(self, src: str, dst: str) -> tuple[int, int]:
        """``(u, v)`` indices of edge ``src -> dst``; a clear error for unknown names or non-edges."""
        if src not in self.upstream:
            raise ConfigError(f"unknown upstream node {src!r}; e.g. {list(self.upstream[:4])}")
        if dst not in self.downstream:
            raise ConfigError(f"unknown downstream node {dst!r}; e.g. {list(self.downstream[:4])}")
        u, v = self.upstream.index(src), self.downstream.index(dst)
        if not self.mask[u, v]:
            raise ConfigError(f"{src} -> {dst} is not an edge: {src} does not write before {dst} reads")
        return u, v

    def input_sites(self, layer: int) -> list[tuple[Site, slice]]:
        """Downstream sites of block ``layer`` and the ``downstream`` slice each fills."""
        i = self.down_offsets[layer]
        h, g = self.n_heads, self.n_kv_heads
        out = [(Site(layer, "q_input"), slice(i, i + h)), (Site(layer, "k_input"), slice(i + h, i + h + g)),
               (Site(layer, "v_input"), slice(i + h + g, i + h + 2 * g))]
        if self.has_mlp:
            out.append((Site(layer, "mlp_in"), slice(i + h + 2 * g, i + h + 2 * g + 1)))
        return out

    @property
    def down_offsets(self) -> list[int]:
        """Index of each layer's first downstream node."""
        per = self.n_heads + 2 * self.n_kv_heads + int(self.has_mlp)
        return [layer * per for layer in range(self.n_layers)]

    @property
    def up_sites(self) -> list[tuple[Site, slice]]:
        """Upstream sites (``resid_pre@0``, ``attn_z@L``, ``mlp_out@L``) and their ``upstream`` slices."""
        out = [(Site(0, "resid_pre"), slice(0, 1))]
        i = 1
        for layer in range(self.n_layers):
            out.append((Site(layer, "attn_z"), slice(i, i + self.n_heads)))
            i += self.n_heads
            if self.has_mlp:
                out.append((Site(layer, "mlp_out"), slice(i, i + 1)))
                i += 1
        return out


def edge_graph(model: HookedModel) -> EdgeGraph:
    """The computational graph of ``model`` (see the module docstring)."""
    cfg = model.cfg
    n_layers, n_heads = int(cfg.n_layers), int(cfg.n_heads)
    n_kv = int(getattr(cfg, "n_key_value_heads", None) or n_heads)
    has_mlp = not bool(getattr(cfg, "attn_only", False))
    kv = "h" if n_kv == n_heads else "kv"
    up, up_stage, down, down_stage = ["input"], [0], [], []
    for layer in range(n_layers):
        up += [f"a{layer}.h{h}" for h in range(n_heads)]
        up_stage += [2 * layer + 1] * n_heads
        names = ([f"a{layer}.h{h}<q>" for h in range(n_heads)]
                 + [f"a{layer}.{kv}{g}<k>" for g in range(n_kv)] + [f"a{layer}.{kv}{g}<v>" for g in range(n_kv)])
        down += names
        down_stage += [2 * layer + 1] * len(names)
        if has_mlp:
            up.append(f"m{layer}")
            up_stage.append(2 * layer + 2)
            down.append(f"m{layer}")
            down_stage.append(2 * layer + 2)
    down.append("logits")
    down_stage.append(2 * n_layers + 1)
    return EdgeGraph(upstream=tuple(up), downstream=tuple(down), up_stage=tuple(up_stage),
                     down_stage=tuple(down_stage), n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                     has_mlp=has_mlp)


@dataclass(frozen=True, repr=False)
class EdgeScores(NotebookMixin):
    """EAP / EAP-IG edge scores ``(upstream, downstream)``; 0 where no edge exists.

    ``scores[u, v]`` estimates ``m(edge u -> v patched to corrupt) - m(clean)``, averaged over
    pairs; ``clean``/``corrupt`` are the per-pair metrics.
    """

    scores: Float[Tensor, "up down"]
    graph: EdgeGraph
    method: str
    steps: int
    clean: Float[Tensor, " pair"]
    corrupt: Float[Tensor, " pair"]

    def top(self, n: int, *, absolute: bool = True) -> list[tuple[str, str, float]]:
        """The ``n`` highest-scoring edges ``(src, dst, score)`` (by ``|score|`` by default)."""
        flat = self.scores.abs() if absolute else self.scores
        flat = torch.where(self.graph.mask, flat, torch.full_like(flat, -float("inf"))).flatten()
        idx = torch.argsort(flat, descending=True, stable=True)[: min(n, self.graph.n_edges)]
        n_down = len(self.graph.downstream)
        return [(self.graph.upstream[int(i) // n_down], self.graph.downstream[int(i) % n_down],
                 float(self.scores.flatten()[i])) for i in idx]

    def to_dict(self, top: int = 50) -> dict[str, Any]:
        """JSON-ready summary: method, metric values, the ``top`` edges."""
        return {
            "method": self.method, "steps": self.steps, "n_edges": self.graph.n_edges,
            "clean": float(self.clean.mean()), "corrupt": float(self.corrupt.mean()),
            "top_edges": [{"src": s, "dst": d, "score": v} for s, d, v in self.top(top)],
        }

    def to_records(self) -> list[dict[str, Any]]:
        """One row per edge of the graph, by decreasing ``|score|``: ``src``, ``dst``, ``score``."""
        return [{"src": s, "dst": d, "score": v} for s, d, v in self.top(self.graph.n_edges)]

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import edge_table

        steps = f", {self.steps} steps" if self.method != "eap" else ""
        text = (f"{self.method.upper()}{steps} over {self.clean.shape[0]} prompt pairs: metric "
                f"clean {float(self.clean.mean()):.3f}, corrupt {float(self.corrupt.mean()):.3f}; "
                "an edge's score estimates the metric change when it alone is patched to corrupt.")
        return (Text(text=text), edge_table(self, 20))

    def _summary(self) -> str:
        (src, dst, v), = self.top(1)
        return (f"{self.method}, {self.graph.n_edges} edges; top {src} -> {dst} {v:+.4g}; "
                f"clean {float(self.clean.mean()):.3f}, corrupt {float(self.corrupt.mean()):.3f}")


def _head_out(model: HookedModel, layer: int, z: Tensor) -> Tensor:
    """``(batch, pos, head, d_head) -> (batch, pos, head, d_model)``: each head's ``z_h W_O^h``."""
    w_o = model.blocks[layer].attn.W_O
    return torch.einsum("bphd,hdm->bphm", z, w_o.to(z.dtype))


def _up_sites(graph: EdgeGraph) -> list[Site]:
    return [s for s, _ in graph.up_sites]


def upstream_outputs(model: HookedModel, graph: EdgeGraph, reads: dict[Site, Tensor]) -> Float[Tensor, "b pos up d"]:
    """Stack every upstream node's output (aligned ``(batch, pos, up, d_model)``) from reads."""
    parts = []
    with torch.inference_mode():
        for site, _ in graph.up_sites:
            x = reads[site]
            parts.append(_head_out(model, site.layer, x) if site.kind == "attn_z" else x[:, :, None])
        return torch.cat(parts, 2)


def _down_sites(graph: EdgeGraph) -> list[tuple[Site, slice]]:
    out = [x for layer in range(graph.n_layers) for x in graph.input_sites(layer)]
    n = len(graph.downstream)
    return out + [(Site(graph.n_layers - 1, "resid_post"), slice(n - 1, n))]


def _validate(model: HookedModel, clean: Any, corrupt: Any, steps: int) -> tuple[list[list[int]], list[list[int]]]:
    c = as_token_lists(clean, "clean_tokens")
    r = as_token_lists(corrupt, "corrupt_tokens")
    check_pairs(c, r)
    check_token_limits(model, c, "clean_tokens")
    check_token_limits(model, r, "corrupt_tokens")
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
    return c, r


def edge_attribution(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    *,
    method: str = "eap",
    steps: int = 5,
    ig_points: str = "right",
    batch_size: int = 32,
    padding_side: PaddingSide = "right",
) -> EdgeScores:
    """Score every edge of :func:`edge_graph` with EAP (``method="eap"``) or EAP-IG (``"eap-ig"``).

    ``metric`` as for :func:`~probekit.circuits.activation_patching` (last-token logits and pair
    index -> one value per row). EAP-IG interpolates ``resid_pre@0`` between the corrupted and
    clean runs in ``steps`` steps (``alpha = k/steps``, ``k = 1..steps``) and averages the
    gradients; ``ig_points="left"`` uses ``k = 0..steps-1`` instead (the ``hannamw/EAP-IG``
    code's rule, which starts at the corrupted input and stops short of the clean one).
    ``batch_size`` rows (pair x step) run per forward + backward.
    """
    if method not in ("eap", "eap-ig"):
        raise ConfigError(f"method {method!r} unknown; use 'eap' or 'eap-ig'")
    if ig_points not in ("right", "left"):
        raise ConfigError(f"ig_points {ig_points!r} unknown; use 'right' (k = 1..steps) or 'left' (k = 0..steps-1)")
    steps = 1 if method == "eap" else steps
    metric = as_pair_metric(metric)  # a TransformerLens-style metric(logits) is adapted
    clean, corrupt = _validate(model, clean_tokens, corrupt_tokens, steps)
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    graph = edge_graph(model)
    ups = _up_sites(graph)
    embed = Site(0, "resid_pre")
    downs = _down_sites(graph)
    kw = dict(padding_side=padding_side, logits="last")
    shift = 1 if method == "eap-ig" and ig_points == "left" else 0
    scores = torch.zeros(len(graph.upstream), len(graph.downstream), dtype=torch.float64)
    m_clean, m_corrupt = [], []
    per = max(1, batch_size // steps)  # pairs per chunk: memory is bounded by the chunk, not the data
    for lo in track(range(0, len(clean), per), desc=method, unit="pair", total=len(clean),
                    weight=lambda lo: min(per, len(clean) - lo)):
        ids = torch.arange(lo, min(lo + per, len(clean)))
        c_toks, r_toks = [clean[i] for i in ids.tolist()], [corrupt[i] for i in ids.tolist()]
        cor = run_with_interventions(model, r_toks, [Read(site=s) for s in ups], **kw)
        cln = run_with_interventions(model, c_toks, [Read(site=s) for s in ups], **kw)
        m_clean.append(run_metric(metric, cln.output, ids))
        m_corrupt.append(run_metric(metric, cor.output, ids))
        delta = upstream_outputs(model, graph, cor.reads) - upstream_outputs(model, graph, cln.reads)
        grads = torch.zeros(len(ids), delta.shape[1], len(graph.downstream), delta.shape[-1], dtype=delta.dtype)
        rows = [(j, k) for k in range(1, steps + 1) for j in range(len(ids))]
        for lo2 in range(0, len(rows), batch_size):
            chunk = rows[lo2: lo2 + batch_size]
            local = torch.tensor([j for j, _ in chunk])
            alpha = torch.tensor([(k - shift) / steps for _, k in chunk], dtype=delta.dtype)[:, None, None]
            x_cor, x_cln = cor.reads[embed][local], cln.reads[embed][local]
            ops: list = [Grad(site=s) for s, _ in downs]
            if method == "eap-ig":
                ops.insert(0, Replace(site=embed, values=x_cor + alpha * (x_cln - x_cor)))

            def objective(last_logits: Tensor, batch: object, pairs: Tensor = ids[local]) -> Tensor:
                return metric(last_logits, pairs.to(last_logits.device))

            run = run_with_interventions(model, [c_toks[j] for j in local.tolist()], ops, objective=objective, **kw)
            for site, sl in downs:
                g = run.grads[site]
                g = g if g.ndim == 4 else g[:, :, None]
                grads[:, : g.shape[1], sl].index_add_(0, local, g.detach().to(grads.dtype))
        with torch.inference_mode():
            scores += torch.einsum("bpud,bpvd->uv", delta, grads).double().cpu()
    with torch.inference_mode():
        scores = scores / (steps * len(clean))
        scores = torch.where(graph.mask, scores, torch.zeros_like(scores)).float()
    return EdgeScores(scores=scores, graph=graph, method=method, steps=steps, clean=torch.cat(m_clean).cpu(),
                      corrupt=torch.cat(m_corrupt).cpu())


def top_k_edges(scores: EdgeScores, k: int, *, absolute: bool = True) -> Bool[Tensor, "up down"]:
    """Mask of the ``k`` highest-scoring real edges (by ``|score|`` unless ``absolute=False``)."""
    n = scores.graph.n_edges
    if not 0 <= k <= n:
        raise ConfigError(f"k={k} out of range; the graph has {n} edges (0..{n})")
    s = scores.scores.abs() if absolute else scores.scores
    s = torch.where(scores.graph.mask, s, torch.full_like(s, -float("inf"))).flatten()
    keep = torch.zeros(s.numel(), dtype=torch.bool)
    keep[torch.argsort(s, descending=True, stable=True)[:k]] = True
    return keep.reshape(scores.scores.shape)


def _patch_fn(model: HookedModel, graph: EdgeGraph, site: Site, sl: slice, ref: Tensor, keep: Tensor,
              state: dict) -> tuple[Any, tuple[Site, ...]]:
    """Recompute fn for downstream ``site``: subtract ``sum_{u not kept} (a_u(now) - ref_u)``.

    ``state`` is shared by the downstream sites of one forward pass: a buffer ``(row, pos, up,
    d_model)`` of ``delta_u = a_u(now) - ref_u``, filled once per upstream node as the pass
    reaches it, and their running sum (every upstream node reached so far is upstream of the
    site being computed). The patch is the sum over dropped edges, or -- cheaper when few edges
    are kept -- the running sum minus the sum over kept edges; only upstream nodes with an edge
    of that kind in some row enter the contraction.
    """
    stage = graph.down_stage[sl.start]
    srcs = [(s, u) for s, u in graph.up_sites if graph.up_stage[u.start] < stage]
    inputs = tuple(s for s, _ in srcs)
    n_up = max(u.stop for _, u in srcs)
    kept = keep[:, :n_up, sl]
    used_keep = kept.any(0).any(-1).nonzero()[:, 0]
    used_drop = (~kept).any(0).any(-1).nonzero()[:, 0]

    def fn(value: Tensor, live: dict[Site, Tensor]) -> Tensor:
        buf = state.get("buf")
        if buf is None or buf.shape[1] != value.shape[1]:
            buf = state["buf"] = value.new_zeros(value.shape[0], value.shape[1], len(graph.upstream),
                                                 value.shape[-1])
            state["sum"] = value.new_zeros(value.shape[0], value.shape[1], value.shape[-1])
            state["done"] = {}
        done = state["done"]
        for s, u in srcs:
            x = live[s]
            if done.get(s) is not x:
                out = _head_out(model, s.layer, x) if s.kind == "attn_z" else x[:, :, None]
                delta = out - ref[:, : out.shape[1], u].to(out.dtype)
                buf[:, :, u] = delta
                state["sum"] = state["sum"] + delta.sum(2)
                done[s] = x
        w = kept.to(buf.dtype)
        if len(used_keep) < len(used_drop):  # few kept edges: all-upstream sum minus the kept ones
            patch = state["sum"][:, :, None] - torch.einsum(
                "bpud,buv->bpvd", buf[:, :, used_keep], w[:, used_keep])
        else:
            patch = torch.einsum("bpud,buv->bpvd", buf[:, :, used_drop], 1 - w[:, used_drop])
        return value - (patch if value.ndim == 4 else patch[:, :, 0])

    return fn, inputs


@shape_checked
def edge_patched_metric(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    circuits: Bool[Tensor, "*circuit up down"],
    *,
    ablation: str = "patch",
    batch_size: int = 32,
    padding_side: PaddingSide = "right",
) -> Float[Tensor, "pair circuit"]:
    """Metric of the clean prompts when only each circuit's edges carry this run's activations.

    Every other edge ``u -> v`` carries ``u``'s activation from the corrupted prompt
    (``ablation="patch"``) or its mean over every real token of the corrupted prompts
    (``"mean"``). One forward per circuit and chunk of ``batch_size`` pairs.
    """
    clean, corrupt = _validate(model, clean_tokens, corrupt_tokens, 1)
    graph = edge_graph(model)
    if circuits.ndim == 2:
        circuits = circuits[None]
    if tuple(circuits.shape[1:]) != (len(graph.upstream), len(graph.downstream)):
        raise DataError(
            f"circuits have shape {tuple(circuits.shape)}, expected (circuit, {len(graph.upstream)}, "
            f"{len(graph.downstream)}) = (circuit, upstream, downstream) of edge_graph(model)"
        )
    if ablation not in ("patch", "mean"):
        raise ConfigError(f"ablation {ablation!r} unknown; use 'patch' or 'mean'")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    ups = _up_sites(graph)
    n_circ = circuits.shape[0]

    def reference(ids: list[int]) -> Tensor:
        """Upstream outputs of these corrupted prompts (aligned ``(pair, pos, up, d)``)."""
        cor = run_with_interventions(model, [corrupt[i] for i in ids], [Read(site=s) for s in ups],
                                     padding_side=padding_side, logits="none")
        return upstream_outputs(model, graph, cor.reads)

    # chunks of pairs (memory bounded by batch_size); one forward per (chunk, circuit): rows of one
    # circuit share their kept edges, so the patch contracts over few upstream nodes
    chunks = [list(range(lo, min(lo + batch_size, len(clean)))) for lo in range(0, len(clean), batch_size)]
    mean = None
    if ablation == "mean":  # one pass over the corrupted prompts: the mean over every real token
        total, count = None, 0
        for ids in chunks:
            ref = reference(ids)
            lengths = torch.tensor([len(corrupt[i]) for i in ids])
            real = (torch.arange(ref.shape[1])[None, :] < lengths[:, None]).to(ref.dtype)
            part = (ref * real[:, :, None, None]).sum((0, 1))
            total, count = (part if total is None else total + part), count + int(lengths.sum())
        mean = total / count
    keep_all = circuits.bool() & graph.mask[None]
    out = torch.full((len(clean), n_circ), float("nan"))
    for ids in track(chunks, desc="edge patching", unit="cell", total=len(clean) * n_circ,
                     weight=lambda ids: len(ids) * n_circ):
        ref = reference(ids) if mean is None else None
        pairs = torch.tensor(ids)
        width = max(len(clean[p]) for p in ids)
        ref_rows = ref if mean is None else mean.expand(len(ids), width, *mean.shape)
        for c in range(n_circ):
            keep = keep_all[c].expand(len(ids), *keep_all.shape[1:])
            state: dict = {}
            ops = []
            for site, sl in _down_sites(graph):
                fn, inputs = _patch_fn(model, graph, site, sl, ref_rows, keep, state)
                ops.append(Recompute(site=site, fn=fn, inputs=inputs))
            run = run_with_interventions(model, [clean[p] for p in ids], ops,
                                         padding_side=padding_side, logits="last")
            out[pairs, c] = run_metric(metric, run.output, pairs).cpu()
    return out


@dataclass(frozen=True, repr=False)
class FaithfulnessCurve(NotebookMixin):
    """Metric of top-``k`` edge circuits vs ``k`` (Hanna et al. 2024, Fig. 2).

    ``per_pair[pair, i]`` is the metric with the top ``ks[i]`` edges kept; ``normalized[i] =
    (mean_m(k) - mean_m_corrupt) / (mean_m_clean - mean_m_corrupt)`` (1 = the circuit restores
    the clean behaviour, 0 = no better than the corrupted run).
    """

    ks: tuple[int, ...]
    per_pair: Float[Tensor, "pair k"]
    normalized: Float[Tensor, " k"]
    clean: Float[Tensor, " pair"]
    corrupt: Float[Tensor, " pair"]
    n_edges: int
    method: str
    ablation: str
    top_edges: list[tuple[str, str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready numbers."""
        return {
            "ks": list(self.ks), "normalized": [float(x) for x in self.normalized],
            "metric": [float(x) for x in self.per_pair.mean(0)],
            "clean": float(self.clean.mean()), "corrupt": float(self.corrupt.mean()),
            "n_edges": self.n_edges, "method": self.method, "ablation": self.ablation,
            "top_edges": [{"src": s, "dst": d, "score": v} for s, d, v in self.top_edges],
        }

    def to_records(self) -> list[dict[str, Any]]:
        """One row per ``k``: the circuit's pair-mean ``metric`` and its ``normalized`` share."""
        metric = self.per_pair.mean(0).tolist()
        return [{"k": int(k), "metric": float(m), "normalized": float(n)}
                for k, m, n in zip(self.ks, metric, self.normalized.tolist(), strict=True)]

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import faithfulness_plot

        table = Table(
            columns=(Column(key="k", header="edges kept (k)", fmt="d"),
                     Column(key="metric", header="metric"),
                     Column(key="normalized", header="recovered share")),
            rows=tuple(self.to_records()),
            caption=f"of {self.n_edges} edges ({self.method}); clean "
                    f"{float(self.clean.mean()):.3f}, corrupt {float(self.corrupt.mean()):.3f}",
        )
        return (faithfulness_plot(self), table)

    def _summary(self) -> str:
        pts = ", ".join(f"k={k}: {float(v):.3f}" for k, v in zip(self.ks[:6], self.normalized))
        more = ", ..." if len(self.ks) > 6 else ""
        return f"{self.method} {self.ablation}, {self.n_edges} edges; recovered {pts}{more}"


def faithfulness_curve(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    scores: EdgeScores,
    ks: Sequence[int],
    *,
    ablation: str = "patch",
    absolute: bool = True,
    batch_size: int = 32,
    padding_side: PaddingSide = "right",
) -> FaithfulnessCurve:
    """Run the top-``k`` circuit of ``scores`` for each ``k`` in ``ks`` (others patched/mean-ablated)."""
    ks = tuple(int(k) for k in ks)
    if not ks:
        raise ConfigError("ks is empty; give edge counts, e.g. [10, 100, 1000]")
    circuits = torch.stack([top_k_edges(scores, k, absolute=absolute) for k in ks])
    per_pair = edge_patched_metric(model, clean_tokens, corrupt_tokens, metric, circuits, ablation=ablation,
                                   batch_size=batch_size, padding_side=padding_side)
    clean_m, corrupt_m = scores.clean.mean(), scores.corrupt.mean()
    if float((clean_m - corrupt_m).abs()) < 1e-12:
        raise DataError("clean and corrupted metrics are equal; the normalised faithfulness is undefined")
    normalized = (per_pair.mean(0) - corrupt_m) / (clean_m - corrupt_m)
    return FaithfulnessCurve(ks=ks, per_pair=per_pair, normalized=normalized, clean=scores.clean,
                             corrupt=scores.corrupt, n_edges=scores.graph.n_edges, method=scores.method,
                             ablation=ablation, top_edges=scores.top(max(ks)))
