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
# # Tutorial 1: probes and a layer sweep on a grokked modular-addition transformer
#
# A one-layer transformer trained on `a + b mod 53` (the Nanda et al. 2023 architecture, shipped in
# `probes/checkpoints/modadd-p53`: train accuracy 1.000, held-out accuracy 0.989) has *grokked*:
# it answers pairs it never saw. Where in the network is the answer computed? We
#
# 1. capture activations at the `=` token at every site of the block,
# 2. fit a linear probe for the answer at each site in one batched **layer sweep** (the site is
#    chosen on cross-validation of the training pairs, reported on held-out pairs with a bootstrap
#    CI), and
# 3. test the selected site with a **permutation test** (labels shuffled, probe refit).
#
# Every result below displays itself: evaluating it in a cell shows the same table and plot as
# the HTML report of `probekit report probes/modadd_grokked.toml`; `to_frame()` gives a pandas
# DataFrame and `plot()` a matplotlib figure.
#
# Runs on a laptop CPU in well under a minute. `PROBEKIT_TUTORIAL_FAST=1` (the test suite) uses
# fewer pairs and permutations.

# %%
import os
from pathlib import Path

import numpy as np

import probekit
from probekit.capture import LastToken, Site, collect_activations
from probekit.probes import SweepConfig, probe_permutation_test, sweep_layers

FAST = os.environ.get("PROBEKIT_TUTORIAL_FAST") == "1"
# the repository root: the folder above this notebook holding probes/checkpoints
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "probes" / "checkpoints").is_dir())
model = probekit.load_checkpoint(ROOT / "probes" / "checkpoints" / "modadd-p53")
model.cfg.n_layers, model.cfg.d_model, model.cfg.d_vocab

# %% [markdown]
# ## The data: the task the checkpoint was trained on
#
# The checkpoint records its task (`modular_addition`, p = 53, 60% of the 2809 pairs for
# training, seed 0), so we rebuild exactly its train / held-out split. Each example is the three
# tokens `a b =`; the label is `(a + b) mod 53`.

# %%
from probekit.testbeds.modular import ModularAddition, ModularAdditionConfig

task = ModularAddition(ModularAdditionConfig(p=53, train_fraction=0.6, seed=0))
splits = task.splits()
n_per_split = 600 if FAST else 1000  # ~11 pairs per class: no class with a single training example
rng = np.random.default_rng(0)
train = splits["train"]
held_out = splits["test_id"]
pick_tr = rng.choice(len(train.tokens), n_per_split, replace=False)
pick_te = rng.choice(len(held_out.tokens), n_per_split, replace=False)
tokens = [train.tokens[i] for i in pick_tr] + [held_out.tokens[i] for i in pick_te]
answer = np.array([train.metadata["answer"][i] for i in pick_tr]
                  + [held_out.metadata["answer"][i] for i in pick_te])
train_idx = np.arange(n_per_split)                 # pairs the model was trained on
test_idx = np.arange(n_per_split, 2 * n_per_split)  # pairs it never saw
tokens[:3], answer[:3]

# %% [markdown]
# ## Capture
#
# `collect_activations` runs the model once and keeps the activations at the last token (`=`)
# of four sites: the token embedding, the residual stream after attention (`resid_mid`), the MLP
# neurons (`mlp_post`) and the block output (`resid_post`).

# %%
sites = [Site(None, "embed"), Site(0, "resid_mid"), Site(0, "mlp_post"), Site(0, "resid_post")]
captured = collect_activations(model, tokens, sites, positions=LastToken(), batch_size=512)
{site.name: tuple(a.shape) for site, a in captured.acts.items()}

# %% [markdown]
# ## The layer sweep
#
# One multinomial logistic probe per site, its L2 strength chosen by 3-fold cross-validation on
# the training pairs, all sites solved in one batched L-BFGS. The best site is chosen on the CV
# validation accuracy and reported on the held-out pairs. Evaluate the result to see it:

# %%
sweep = sweep_layers(captured.acts, answer, train_idx=train_idx, test_idx=test_idx,
                     config=SweepConfig(Cs=3, cv=3))
sweep

# %% [markdown]
# The answer is not linearly decodable from the embedding of `=` (the same token in every
# example), weakly after attention, better from the MLP neurons and best from the block output,
# where the MLP's output has been added to the residual stream: the MLP computes `a + b mod p`.
# `repr` is one line for a terminal:

# %%
print(repr(sweep))

# %% [markdown]
# The same rows as a pandas DataFrame (one row per site; `selected` marks the chosen one):

# %%
frame = sweep.to_frame()
frame[["site", "train", "val", "test", "test_ci_low", "test_ci_high", "selected"]]

# %% [markdown]
# and the report's plot as a matplotlib figure, to restyle or save (`fig.savefig(...)`):

# %%
fig = sweep.plot()
fig

# %% [markdown]
# ## Is it more than chance? A permutation test
#
# At the selected site we shuffle the training labels, refit the probe (same C) and score it on
# the held-out pairs, many times; the p-value is the share of shuffles that do as well as the real
# labels (with the +1 correction, so it is never 0). Each shuffle is a refit of a 53-class probe
# on labels with no structure, the slow part of this notebook: the fast version (tests) uses 9
# shuffles, whose smallest possible p-value is 0.1; the full version 199 (p >= 0.005).

# %%
N_PERM = 9 if FAST else 199  # the smallest possible p-value is 1 / (1 + N_PERM)
best = sweep.best_row
best_site = next(s for s in captured.acts if s.name == sweep.best_site)
perm = probe_permutation_test(
    captured.acts[best_site], answer, train_idx=train_idx, test_idx=test_idx,
    C=float(sweep.hyperparameter[best]), n_permutations=N_PERM, random_state=0,
)
perm

# %% [markdown]
# The p-value sits at its floor `1 / (1 + n_permutations)`: no shuffle comes close. The test's
# numbers are a one-row DataFrame too:

# %%
perm.to_frame()

# %%
assert sweep.best_site in {Site(0, "mlp_post").name, Site(0, "resid_post").name}
assert sweep.best_test > 0.9 and sweep.test[0] < 0.1
assert perm.p_value <= 1 / (1 + N_PERM) + 1e-12
