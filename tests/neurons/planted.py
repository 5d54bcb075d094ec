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

E, R, RED = 8, 3, 4
D_MLP = 64  # many silent units, so matched random sets rarely hit a relation twice


def planted_model(seed: int = 0):
    """Return ``(model, facts)``; facts = list of (tokens, relation, object id)."""
    rng = np.random.default_rng(seed)
    table = rng.integers(0, E, size=(R, E))  # f_r(s)
    d = 32
    cfg = ModelConfig(n_layers=2, d_model=d, n_heads=1, d_head=d, d_mlp=D_MLP, act_fn="relu",
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
