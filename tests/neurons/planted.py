"""A hand-set 2-layer model whose relation neurons are known (used by the neurons tests).

Facts ``[s, r] -> f_r(s)`` for E entities and R relations. Layer 0's attention copies the
subject to the relation position; layer 0's MLP has ``n_redundant`` units per relation that fire
on the relation token (the planted relation neurons, each carrying 1/n_redundant of a
"relation r" feature); layer 1's MLP has one unit per fact keyed on (subject, relation feature)
that fires only while at least half of r's relation units are on, and writes the object's logit.
"""

from __future__ import annotations

import numpy as np
import torch

from probekit.models import ModelConfig, build_model
from probekit.neurons import FactSet, neuron_statistics
from probekit.sites import Site

E, R, RED = 8, 3, 4
D_MLP = 64  # many silent units, so matched random sets rarely hit a relation twice


def planted_model(seed: int = 0, *, d_mlp: int = D_MLP):
    """Return ``(model, facts)``; facts = list of (tokens, relation, object id).

    A wider ``d_mlp`` adds silent units, so random sets hit a relation's units more rarely.
    """
    rng = np.random.default_rng(seed)
    table = rng.integers(0, E, size=(R, E))  # f_r(s)
    d = 32
    cfg = ModelConfig(n_layers=2, d_model=d, n_heads=1, d_head=d, d_mlp=d_mlp, act_fn="relu",
                      normalization_type=None, d_vocab=E + R, n_ctx=2)
    model = build_model(cfg)
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    tok, subj, relf, pos, obj = 0, E + R, E + R + E, E + R + E + R, 24
    for t in range(E + R):
        sd["embed.weight"][t, tok + t] = 1.0
    sd["pos_embed.weight"][0, pos] = 1.0
    sd["pos_embed.weight"][1, pos + 1] = 1.0
    # layer 0 attention: position 1 attends to position 0 and copies the subject one-hot
    sd["blocks.0.attn.q.weight"][0, pos + 1] = 30.0
    sd["blocks.0.attn.k.weight"][0, pos] = 30.0
    for e in range(E):
        sd["blocks.0.attn.v.weight"][1 + e, tok + e] = 1.0
        sd["blocks.0.attn.o.weight"][subj + e, 1 + e] = 1.0
    # layer 0 MLP: RED relation units per relation
    for r in range(R):
        for j in range(RED):
            u = r * RED + j
            sd["blocks.0.mlp.in.weight"][u, tok + E + r] = 1.0
            sd["blocks.0.mlp.out.weight"][relf + r, u] = 1.0 / RED
    # layer 1 MLP: one unit per fact, on iff subject present and >= half of r's units on
    for s in range(E):
        for r in range(R):
            u = s * R + r
            sd["blocks.1.mlp.in.weight"][u, subj + s] = 1.0
            sd["blocks.1.mlp.in.weight"][u, relf + r] = 1.0
            sd["blocks.1.mlp.in.bias"][u] = -1.5
            sd["blocks.1.mlp.out.weight"][obj + table[r, s], u] = 10.0
    for e in range(E):
        sd["unembed.weight"][e, obj + e] = 1.0
    sd["unembed.bias"][E] = 0.1  # with no object logit, predict a relation token (wrong)
    model.load_state_dict(sd)
    facts = [([s, E + r], f"rel{r}", int(table[r, s])) for r in range(R) for s in range(E)]
    return model.eval(), facts


def graded_null_model(seed: int = 0, *, n_entities: int = 16, n_relations: int = 3):
    """A model whose relations share every unit: a null for the random-set test.

    Layer 0's MLP has ``D_MLP`` units that fire (response 1) at every position of every prompt
    and write iid exponential weights ``w_u`` (normalised to sum 1) into one shared feature
    ``G``; fact ``(s, r)`` is recalled while ``G > g[s, r]`` (thresholds uniform in (0.7, 0.98)).
    Every layer-0 unit has the same AP for every relation (constant response), so a relation's
    "top" units are just the first few by index; their weights are iid like any random set's,
    so the p-value of "r's units hurt r more than random sets" is (conservatively) uniform over
    seeds. Returns ``(model, facts)``.
    """
    rng = np.random.default_rng(seed)
    e, r_n = n_entities, n_relations
    table = rng.integers(0, e, size=(r_n, e))
    weights = rng.exponential(size=D_MLP)
    weights /= weights.sum()
    thresholds = rng.uniform(0.7, 0.98, size=(e, r_n))
    d = 64
    cfg = ModelConfig(n_layers=2, d_model=d, n_heads=1, d_head=d, d_mlp=D_MLP, act_fn="relu",
                      normalization_type=None, d_vocab=e + r_n, n_ctx=2)
    model = build_model(cfg)
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    tok, subj, g, pos, obj = 0, e + r_n, e + r_n + e, e + r_n + e + 1, e + r_n + e + 3
    for t in range(e + r_n):
        sd["embed.weight"][t, tok + t] = 1.0
    sd["pos_embed.weight"][0, pos] = 1.0
    sd["pos_embed.weight"][1, pos + 1] = 1.0
    sd["blocks.0.attn.q.weight"][0, pos + 1] = 30.0
    sd["blocks.0.attn.k.weight"][0, pos] = 30.0
    for s in range(e):
        sd["blocks.0.attn.v.weight"][1 + s, tok + s] = 1.0
        sd["blocks.0.attn.o.weight"][subj + s, 1 + s] = 1.0
    sd["blocks.0.mlp.in.bias"][:] = 1.0  # every unit on, everywhere
    sd["blocks.0.mlp.out.weight"][g] = torch.tensor(weights, dtype=torch.float32)
    for s in range(e):
        for r in range(r_n):
            u = s * r_n + r
            sd["blocks.1.mlp.in.weight"][u, subj + s] = 100.0
            sd["blocks.1.mlp.in.weight"][u, tok + e + r] = 100.0
            sd["blocks.1.mlp.in.weight"][u, g] = 100.0
            sd["blocks.1.mlp.in.bias"][u] = -100.0 * (2.0 + thresholds[s, r])
            sd["blocks.1.mlp.out.weight"][obj + table[r, s], u] = 10.0
    for s in range(e):
        sd["unembed.weight"][s, obj + s] = 1.0
    sd["unembed.bias"][e] = 0.1
    model.load_state_dict(sd)
    facts = [([s, e + r], f"rel{r}", int(table[r, s])) for r in range(r_n) for s in range(e)]
    return model.eval(), facts


PLANTED_SITES = (Site(0, "mlp_post"), Site(1, "mlp_post"))


def planted_study(seed: int = 0):
    """``(model, FactSet, NeuronStatistics)`` of :func:`planted_model` over its MLP-post sites."""
    model, facts = planted_model(seed)
    tokens = [f[0] for f in facts]
    rels = [f[1] for f in facts]
    fs = FactSet(tuple(map(tuple, tokens)), tuple(rels), tuple(str(f[2]) for f in facts),
                 tuple(f[2] for f in facts))
    return model, fs, neuron_statistics(model, tokens, rels, list(PLANTED_SITES))


class IdTokenizer:
    """Decodes ids as space-separated numbers, so gold object ``str(id)`` is a generation match."""

    @staticmethod
    def decode(ids):
        return " ".join(str(i) for i in ids)
