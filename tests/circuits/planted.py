"""A 2-layer transformer whose answer circuit is known by construction (hand-set weights).

Task: predict the prompt's first token. Residual subspaces: token one-hots ``T``, position
one-hots ``P``, ``M1``, ``M2`` and junk ``J``. Head ``a0.h0`` attends from every position to
position 0 (its key reads ``P_0``, its query is a bias) and copies the token (``T``) into ``M1``;
head ``a1.h1`` attends to its own position (query and key read ``P``) and copies ``M1`` into
``M2``; the unembedding reads ``M2``. Head ``a0.h1``, ``a1.h0`` and both MLPs have random
weights that read everything and write only to ``J``, which nothing reads. Clean and corrupted
prompts differ only in the first token, so the circuit is exactly
``input -> a0.h0<v>``, ``a0.h0 -> a1.h1<v>``, ``a1.h1 -> logits``.
"""

import torch

from probekit.models import ModelConfig, build_model

V, N_CTX, D_HEAD = 6, 8, 8
T, P, M1, M2, J = 0, V, V + N_CTX, 2 * V + N_CTX, 3 * V + N_CTX
D_MODEL = J + 6
CONFIG = ModelConfig(n_layers=2, d_model=D_MODEL, n_heads=2, d_head=D_HEAD, d_vocab=V, n_ctx=N_CTX,
                     d_mlp=8, act_fn="relu", normalization_type=None)
TRUE_EDGES = {("input", "a0.h0<v>"), ("a0.h0", "a1.h1<v>"), ("a1.h1", "logits")}


def _o(module):
    return getattr(module, "original_component", None) or module


def planted_model(dtype=torch.float32):
    """The hand-set model (see the module docstring)."""
    model = build_model(CONFIG)
    g = torch.Generator().manual_seed(0)
    c, dh = 6.0, D_HEAD
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        emb = _o(model.embed).weight
        emb[torch.arange(V), T + torch.arange(V)] = 1.0
        pos = _o(model.pos_embed).weight
        pos[torch.arange(N_CTX), P + torch.arange(N_CTX)] = 1.0
        a0, a1 = _o(model.blocks[0].attn), _o(model.blocks[1].attn)
        wq0, wk0, wv0, wo0 = (_o(getattr(a0, x)) for x in "qkvo")
        wq1, wk1, wv1, wo1 = (_o(getattr(a1, x)) for x in "qkvo")
        # a0.h0: query = bias, key reads P_0 -> attends to position 0; value = token one-hot -> M1
        wq0.bias[0] = c
        wk0.weight[0, P] = c
        wv0.weight[torch.arange(V), T + torch.arange(V)] = 1.0
        wo0.weight[M1 + torch.arange(V), torch.arange(V)] = 1.0
        # a1.h1: query and key read P -> attends to itself; value reads M1 -> M2
        wq1.weight[dh + torch.arange(N_CTX), P + torch.arange(N_CTX)] = c
        wk1.weight[dh + torch.arange(N_CTX), P + torch.arange(N_CTX)] = c
        wv1.weight[dh + torch.arange(V), M1 + torch.arange(V)] = 1.0
        wo1.weight[M2 + torch.arange(V), dh + torch.arange(V)] = 1.0
        # distractors: a0.h1, a1.h0 and the MLPs read everything and write only to J
        for attn, head in ((a0, 1), (a1, 0)):
            rows = slice(head * dh, (head + 1) * dh)
            for x in "qkv":
                _o(getattr(attn, x)).weight[rows] = torch.randn(dh, D_MODEL, generator=g)
            _o(attn.o).weight[J:, rows] = torch.randn(D_MODEL - J, dh, generator=g)
        for block in model.blocks:
            mlp = _o(block.mlp)
            mlp.fc_in.weight.copy_(torch.randn(mlp.fc_in.weight.shape, generator=g))
            mlp.fc_in.bias.fill_(0.5)
            mlp.fc_out.weight[J:] = torch.randn(D_MODEL - J, mlp.fc_out.weight.shape[1], generator=g)
        _o(model.unembed).weight[torch.arange(V), M2 + torch.arange(V)] = 5.0
    return model.to(dtype)


def planted_pairs(n: int = 6, length: int = 5, seed: int = 0):
    """Clean/corrupted prompts differing in the first token; answers (clean first) and foils."""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, V, (n, length), generator=g)
    corrupt = clean.clone()
    corrupt[:, 0] = (clean[:, 0] + torch.randint(1, V, (n,), generator=g)) % V
    return clean.tolist(), corrupt.tolist(), clean[:, 0], corrupt[:, 0]
