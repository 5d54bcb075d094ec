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
# # Tutorial 4: geometry, similarity and homomorphism error on a testbed model
#
# Three views of the representations of the modular-addition testbed (`a + b mod 53`, one block;
# `probes/checkpoints/modadd-p53-series` holds 5 checkpoints of one training run, from
# initialisation to step 1000, when it has grokked):
#
# 1. **geometry**: how separable the answer classes are at each site, by mean-field manifold
#    capacity (Chung, Lee & Sompolinsky 2018) and simpler estimators (participation ratio, NC1);
# 2. **similarity**: linear CKA between sites, and how each site's representation drifts over
#    training (Kornblith et al. 2019);
# 3. **homomorphism error (HE)**: is the state at `=` an affine (or bilinear) function of the
#    states of `a` and `b`? (An & Du 2026).
#
# `PROBEKIT_TUTORIAL_FAST=1` (the tests) uses fewer pairs, classes and Gaussian samples.

# %%
import os
from pathlib import Path

import numpy as np
import torch

import probekit
from probekit.capture import AllTokens, LastToken, Site, collect_activations
from probekit.geometry import geometry_by_layer
from probekit.homomorphism import HEConfig, composition_he
from probekit.similarity import checkpoint_drift, layer_similarity
from probekit.testbeds.modular import ModularAddition, ModularAdditionConfig

FAST = os.environ.get("PROBEKIT_TUTORIAL_FAST") == "1"
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "probes" / "checkpoints").is_dir())
SERIES = sorted((ROOT / "probes" / "checkpoints" / "modadd-p53-series").glob("step_*"))
model = probekit.load_checkpoint(SERIES[-1])  # step 1000: grokked
[p.name for p in SERIES]

# %% [markdown]
# ## Data: held-out pairs
#
# The pairs the run never trained on (its `test_id` split), the same for every checkpoint.

# %%
task = ModularAddition(ModularAdditionConfig(p=53, train_fraction=0.6, seed=0))
held_out = task.splits()["test_id"]
n = 400 if FAST else 1100
tokens = held_out.tokens[:n]
answer = np.array(held_out.metadata["answer"][:n])
sites = [Site(0, "resid_mid"), Site(0, "mlp_post"), Site(0, "resid_post")]
acts = collect_activations(model, tokens, sites, positions=LastToken(), batch_size=512).acts
len(tokens), {s.name: tuple(a.shape) for s, a in acts.items()}

# %% [markdown]
# ## Geometry of the answer classes
#
# Each answer value is a class manifold (its examples' activations at `=`); capacity `alpha` is
# the number of manifolds per dimension a linear readout can still separate (higher = more
# separable), with their radius `R` and dimension `D`. Sites of equal width form one stack.

# %%
keep = answer < (8 if FAST else 20)  # the first answer classes: 4-20 examples each
stack = torch.stack([acts[Site(0, "resid_mid")], acts[Site(0, "resid_post")]])[:, torch.from_numpy(keep)]
curves = geometry_by_layer(stack.double(), answer[keep],
                           layer_names=["blocks.0.hook_resid_mid", "blocks.0.hook_resid_post"],
                           max_points=10 if FAST else 20, n_t=50 if FAST else 200, seed=0)
curves

# %% [markdown]
# After the MLP (`resid_post`) the classes are more separable than after attention alone
# (`resid_mid`). The numbers per site:

# %%
curves.to_frame()[["layer", "capacity", "radius", "dimension", "participation_ratio", "nc1"]]

# %% [markdown]
# ## Similarity between sites, and drift over training
#
# Linear CKA of every pair of sites (1 = the same up to rotation and scale):

# %%
names = [s.name for s in sites]
within = layer_similarity([acts[s].double() for s in sites], labels_a=names)
within

# %% [markdown]
# Each checkpoint's block output against the final one and against the previous one: the
# representation keeps changing through training and takes its final form only near the end,
# when the model groks.

# %%
per_checkpoint = []
for path in SERIES:
    ckpt = probekit.load_checkpoint(path)
    got = collect_activations(ckpt, tokens, [Site(0, "resid_post")], positions=LastToken(),
                              batch_size=512).acts
    per_checkpoint.append(got[Site(0, "resid_post")].double())
drift = checkpoint_drift(per_checkpoint, labels=[p.name.removeprefix("step_").lstrip("0") or "0"
                                                 for p in SERIES])
drift

# %%
drift.plot()

# %% [markdown]
# ## Homomorphism error: is `=` an affine composition of `a` and `b`?
#
# At two sites (after attention, `resid_mid`, and after the MLP, `resid_post`; the states must
# share a width) we read the states of the three tokens `a b =` and fit operators that map
# the states of `a` and `b` to the state at `=` on 80% of the pairs, scoring the rest. HE [C] is
# the held-out MSE averaged over the operator families; `1 - R^2` (ours) does not scale with the
# size of the states. A small value means the composition is (close to) affine / bilinear.

# %%
he_sites = [Site(0, "resid_mid"), Site(0, "resid_post")]
full = collect_activations(model, tokens, he_sites, positions=AllTokens(), batch_size=512)
pos = full.position
a_state = torch.stack([full.acts[s][pos == 0] for s in he_sites]).double()
b_state = torch.stack([full.acts[s][pos == 1] for s in he_sites]).double()
eq_state = torch.stack([full.acts[s][pos == 2] for s in he_sites]).double()
he = composition_he(a_state, b_state, eq_state, layers=[0, 1], kind="a, b -> =",
                    config=HEConfig(families=("affine", "bilinear")))
he

# %% [markdown]
# (row 0 is `resid_mid`, row 1 `resid_post`). After attention the
# state at `=` is close to an affine function of the two inputs (attention mixes them linearly);
# after the MLP, which computes `a + b mod 53` through trigonometric products, it is not.

# %%
he.to_frame()

# %%
assert curves.capacity[1] > curves.capacity[0]
assert drift.to_final[-1] > 0.999 and drift.to_final[0] < drift.to_final[-2]
assert he.he_normalised[0] < he.he_normalised[1]
