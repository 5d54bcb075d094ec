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
# # Tutorial 5: a generalization diagnosis over a population of models
#
# Does an internal marker -- here An & Du's homomorphism error (HE) -- say anything about a
# model's out-of-distribution accuracy that the training design does not already say? One model
# cannot answer that; a *population* of models can. This tutorial diagnoses the population of
# An & Du's HE noise sweep from its shipped table (80 SCAN models: 16 noise levels x 5 seeds;
# `docs/diagnosis/he_noise/markers.csv`, no training, seconds), reads a marker over layers as one
# family (SCAN noise), compares two populations side by side (HE regulariser on / off), then, in
# the full version only, trains a tiny modular-addition population and diagnoses it end to end.
#
# Definitions and the guide: `docs/diagnosis.md` (after Jiang et al., "Fantastic Generalization
# Measures and Where to Find Them", ICLR 2020, and An & Du's HE study).

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from probekit.diagnosis import (
    calibrate,
    diagnosis_blocks,
    level_mean_r2,
    marker_analysis,
    read_marker_table,
)
from probekit.diagnosis.statistics.compare import compare_populations
from probekit.diagnosis.statistics.families import family_blocks
from probekit.diagnosis.table_diagnosis import diagnose_table
from probekit.report import plots
from probekit.report.blocks import Fold, Scatter

FAST = os.environ.get("PROBEKIT_TUTORIAL_FAST") == "1"
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "probes").is_dir()
            and (p / "docs" / "diagnosis").is_dir())
table = read_marker_table(ROOT / "docs" / "diagnosis" / "he_noise" / "markers.csv")
MARKERS = ["modifier_he", "sequence_he", "modifier_he_normalised", "modifier_he_ridge"]
N_PERM = 300 if FAST else 2000
N_SIM = 20 if FAST else 200  # simulated populations per effect in calibrate
table[["name", "noise", "seed", "id_accuracy", "ood_accuracy", *MARKERS]].head()

# %% [markdown]
# ## The population first
#
# Every diagnosis report opens with its population: the design (knobs and levels, the seeds that
# are the resampling groups, what was held fixed), each outcome's definition with its split and
# number of examples, and each marker in one line. `diagnose_table` runs the shipped diagnosis
# file of this table (`probes/diagnose_he_study.toml`, the full report in seconds) and
# `population()` shows that section on its own: 16 noise levels x 5 seeds = 80 models, the
# number of blocks and the regulariser held fixed, p-values and CIs from models permuted within
# seed strata.

# %%
he_study = diagnose_table(ROOT / "probes" / "diagnose_he_study.toml")
he_study.population()

# %% [markdown]
# ## The marginal view: HE "predicts" OOD accuracy
#
# With no covariates, `marker_analysis` asks the question a single scatter plot asks: over the
# 80 models, does the marker track the outcome? The seed is the design's group (`groups="seed"`,
# also the default when the table has a `seed` column): seed fixed effects are in every model,
# permutations stay within seeds, and the out-of-sample gain `delta R^2` leaves one seed out at
# a time, so a model is never predicted by its own seed's siblings. Evaluating the result shows the report's ranking table and one sentence per marker.
# With no covariates, `adds_beyond_covariates` only means "beyond an intercept": every HE
# variant tracks OOD accuracy (Spearman about -0.84 for modifier HE) and predicts it out of sample.

# %%
marginal = marker_analysis(table, "ood_accuracy", markers=MARKERS, groups="seed",
                           n_permutations=N_PERM)
marginal

# %% [markdown]
# ## Given the noise level, HE says nothing more
#
# The noise level is a design knob that drives *both* HE and OOD accuracy. A marker that only
# reads the knob back correlates with the outcome without telling us anything about a given
# model beyond what its training configuration already says (Jiang et al. 2020, "Fantastic
# Generalization Measures"). The **partial correlation** removes the knob from both sides
# (residuals of marker and outcome after a least-squares fit on the covariates) and correlates
# what is left; its p-value is a Freedman-Lane permutation test (within seeds). Given `noise`,
# modifier HE's partial r drops from about -0.76 to about +0.10, and the leave-one-seed-out
# `delta R^2` is zero. But 80 models cannot show the partial effect *absent*: its 95% CI
# [-0.13, 0.31] reaches past the +-0.2 equivalence margin (the design detects |partial r| >= about 0.37
# with 80% power), so the verdict is *inconclusive*, not *explained by the covariates*.
# Adding ID accuracy as a second covariate changes nothing.
# Covariates enter by what they are: the 16 noise levels and ID accuracy as natural cubic
# splines (a knob with at most 10 levels would be a factor); `covariate_coding={"noise":
# "linear"}` asks for a straight line instead.

# %%
given_noise = marker_analysis(table, "ood_accuracy", markers=MARKERS, covariates=("noise",),
                              groups="seed", n_permutations=N_PERM)
analysis = marker_analysis(table, "ood_accuracy", markers=MARKERS,
                           covariates=("noise", "id_accuracy"), groups="seed",
                           n_permutations=N_PERM)
analysis

# %% [markdown]
# ## What this population can detect
#
# A verdict is a statement about *this* population: would 80 models in 5
# seed groups have seen a marker that does add something? `calibrate` answers on the
# population's own design. It keeps the covariates, the seeds and the 80 models; it replaces the
# outcome by a synthetic one (the real outcome's least-squares fit on the covariates, plus seed
# and model noise with the real residual's variances) and plants a marker whose *true* partial
# correlation with it given the covariates is 0, 0.2, 0.4 or 0.6 (its design part is the
# outcome's, so it is as confounded by the noise level as a marker can be); then it runs
# `marker_analysis` on every synthetic population. The table gives the rejection rate of the
# partial test (its size at 0, its power otherwise), how often each verdict comes out and how
# often the partial r's interval covers the true value, each with its Monte Carlo SE. Every
# diagnosis report ends with this section.
#
# With 200 simulations (the full version): the null is rejected in about 5% (nominal 5%), a
# partial r of 0.2 in about 40% of the populations and 0.4 almost always (80% power from a
# partial r of about 0.34). So the verdict has teeth where it matters: a marker adding a partial
# r of 0.4 beyond the noise level would have been seen; what 80 models cannot do is show an
# effect *absent* to within +-0.2, hence "inconclusive" above. The verdict
# `adds_beyond_covariates` is rarer than a rejection (it also needs an out-of-sample gain), and
# the 95% CI (the partial test inverted, within seeds) covers the true value in 90-95% of the
# simulated populations.
# `marker="modifier_he"` keeps the real marker's own design part instead.

# %%
detect = calibrate(table, "ood_accuracy", covariates=("noise", "id_accuracy"),
                   n_simulations=N_SIM)
print(detect.sentence())
detect

# %% [markdown]
# `to_frame()` is the same numbers as a DataFrame (one row per marker), for your own tables and
# plots; `sentence(marker)` is the one-line verdict the report and `probekit diagnose` print.

# %%
frame = analysis.to_frame()
frame[["marker", "verdict", "spearman", "p_holm", "partial_r", "partial_low", "partial_high",
       "partial_p_holm", "delta_r2"]]

# %%
for name, a in (("none", marginal), ("noise", given_noise), ("noise, id_accuracy", analysis)):
    s = a["modifier_he"]
    print(f"covariates {name:>18}: partial r {s.partial_r:+.2f}, delta R^2 {s.delta_r2:+.3f}, "
          f"{s.verdict}")
print()
print(analysis.sentence("modifier_he"))

# %% [markdown]
# ## Level means overstate what a marker says about one model
#
# An & Du report R^2 over **level means**: outcome and marker averaged over the seeds at each
# noise level, then a polynomial fit of the 16 means. Averaging removes the spread *within* a
# level -- exactly the part that would tell one model from another at the same noise -- so the
# level-mean R^2 (0.93) is far above the same fit over the 80 individual models (0.58), and both
# are far above what HE adds once the noise level is known (partial r +0.10). All three numbers
# are correct; they answer different questions, and only the per-model, partial one answers "does
# this marker tell me something about *this* model?". `level_mean_r2` gives the first two side by
# side (the report shows them beside the ranking, labelled as An & Du's unit).

# %%
levels = level_mean_r2(table, "ood_accuracy", "modifier_he", "noise")
pd.DataFrame(levels.to_records())

# %% [markdown]
# ## The scatter plots of the report
#
# `diagnosis_blocks` builds the report's blocks (the ranking, the sentences, the level-mean
# table and, per marker, a scatter against the outcome and a partial-residual scatter), here
# coloured by the noise level: left, HE tracks OOD accuracy across levels; right, after removing
# noise and ID accuracy from both, the cloud has no slope. `analysis.plot()` draws the right-hand
# kind for the top-ranked marker.

# %%
blocks = diagnosis_blocks(analysis, table, color_by="noise", levels=levels)


def unfold(blocks):
    """The blocks with every folded section (a report's <details>) opened."""
    for b in blocks:
        yield from unfold(b.blocks) if isinstance(b, Fold) else (b,)


scatters = [b for b in unfold(blocks)
            if isinstance(b, Scatter) and b.xlabel.split(" |")[0] == "modifier_he"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
for block, ax in zip(scatters, axes, strict=True):
    plots.draw_scatter(block.to_dict(), ax)
fig

# %% [markdown]
# ## A marker over layers is one family, not four markers
#
# The SCAN noise population (`docs/diagnosis/scan_noise/markers.csv`, 30 models trained by
# probekit) measured the held-out accuracy of a probe for the command's primitive after each of
# its 4 blocks. Read as 4 separate markers they would enlarge the Holm family four times and the
# "best layer" would be picked without paying for the choice. Named `NAME@L<k>` (what a
# `[[marker]]` with `layers = [...]` or `"all"` writes), they form one **family**: Holm within the
# family, the family counted once across markers, and the layer with the smallest partial p named
# with the family's p (the selection included). The curve is the partial r per layer with its CI.
# Here no layer shows a partial effect on OOD length accuracy given the noise level and ID
# accuracy: every layer is inconclusive.

# %%
scan = read_marker_table(ROOT / "docs" / "diagnosis" / "scan_noise" / "markers.csv")
scan = scan[scan["final"] == 1]  # a DataFrame: the final models; the probe is a layer family
FAMILY = [c for c in scan if c.startswith("probe_primitive@L")]
layers = marker_analysis(scan, "ood:ood_len", markers=[*FAMILY, "weight_norm"],
                         covariates=("task.n_noise", "id_accuracy"), n_permutations=N_PERM)
curve, family_sentence, *_ = family_blocks(layers)  # and the folded per-layer blocks
print(family_sentence.text)
fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
plots.draw_line_plot(curve.to_dict(), ax)
fig

# %% [markdown]
# ## Two populations side by side
#
# Is a marker's relation to OOD accuracy the same in two populations -- with and without a
# regulariser, two architectures? `compare_populations` analyses each population on its own and
# tests the **marker x population interaction** on the stacked tables, with the same resampling
# unit (models permuted within seed strata, seeds nested in the population). Here An & Du's HE
# regulariser arm split in two: plain models (`he_lambda` 0) and regularised ones (0.2), 30 each.
# Given the noise level, modifier HE adds nothing in either, and the slopes do not differ (p about
# 0.99): the regulariser changes HE, not what HE says about OOD accuracy. On the command line:
# `probekit diagnose A.toml B.toml --out DIR`.

# %%
he = read_marker_table(ROOT / "docs" / "diagnosis" / "he_regulariser" / "markers.csv")


def arm(weight):
    return he[he["he_lambda"] == weight].reset_index(drop=True)


comparison = compare_populations(arm(0.0), arm(0.2), "ood_accuracy", markers=["modifier_he"],
                                 covariates=("noise",), groups="seed",
                                 labels=("plain", "regularised"), n_permutations=N_PERM)
print(comparison.sentence("modifier_he"))
pd.DataFrame(comparison.tests).T[["delta", "r", "low", "high", "p", "p_holm"]]

# %% [markdown]
# ## A population trained on demand (full version only)
#
# `probekit.diagnosis.diagnose` runs a diagnosis file end to end: it trains the population
# (here `probes/diagnose_modadd_smoke.toml`: 12 small modular-addition runs, weight decay x train
# fraction x 3 seeds, 120 steps each), computes the markers on every checkpoint, analyses them
# as above and writes `markers.csv` and the HTML report. It takes a few minutes on a CPU, so the
# fast version (the test suite's) skips it. The runs are too short to grok: this checks the
# pipeline, not a finding (`probes/diagnose_modadd.toml` is the real population; its report is
# `docs/diagnosis/modadd/`).

# %%
if not FAST:
    import tempfile

    from IPython.display import display

    from probekit.diagnosis import diagnose

    out = Path(tempfile.mkdtemp()) / "diagnose_modadd_smoke"
    result = diagnose(ROOT / "probes" / "diagnose_modadd_smoke.toml", out=out)
    print(sorted(p.name for p in out.iterdir()))
    display(result.analysis)
