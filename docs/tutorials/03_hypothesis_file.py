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
# # Tutorial 3: a hypothesis file, tested from Python and from the CLI
#
# A *hypothesis file* states claims about a specific model the way a paper does ("the answer is
# decodable at `=` after the MLP, accuracy >= 0.9") and lets probekit judge each one:
# **PASS** when the 95% bootstrap CI lies on the claimed side and the Holm-adjusted p-value
# (over the file's claims) is at most alpha, **FAIL** when the CI lies on the other side,
# **INCONCLUSIVE** otherwise. It is a suite's `[suite]`, `[model]`, `[data]`, `[capture]` and
# `[stats]` tables plus `[[claim]]` tables; `probekit test FILE.toml` exits 0 iff every claim
# passes, so a claim file is a regression test for an interpretability result.
#
# We write one for the grokked modular-addition checkpoint (tutorial 1), run it from Python,
# look at the verdicts as a table and a DataFrame, then run the same file with the CLI.

# %%
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from probekit.errors import ConfigError
from probekit.hypotheses import load_hypotheses, registered_kinds, run

FAST = os.environ.get("PROBEKIT_TUTORIAL_FAST") == "1"
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "probes" / "checkpoints").is_dir())
CHECKPOINT = (ROOT / "probes" / "checkpoints" / "modadd-p53").resolve()
WORK = Path(tempfile.mkdtemp(prefix="probekit-tutorial-3-"))
sorted(registered_kinds())  # the measurement kinds a claim can use

# %% [markdown]
# ## Write the file
#
# Three claims on the checkpoint's held-out pairs: the answer is linearly decodable at `=` after
# the block (`resid_post@0`), it is *not* decodable from the embedding of `=` (the same vector in
# every example, so chance is 1/53; a negative result is a claim with the opposite comparison),
# and five Fourier frequencies carry most of the logits' power (Nanda et al. 2023).

# %%
n_per_split = 600  # ~11 pairs per class: no class with a single training example
text = f'''
[suite]
name = "tutorial-modadd"
description = "Where a grokked modular-addition transformer forms its answer."

[model]
checkpoint = "{CHECKPOINT.as_posix()}"

[data]
label = "answer"                # the task's metadata column (a + b mod 53)
train_split = "train"
test_split = "test_id"          # pairs the model never saw
max_per_split = {n_per_split}

[capture]
positions = "last"              # the "=" token
batch_size = 512

[stats]
n_bootstrap = 1000
seed = 0

[[claim]]
name = "the answer is decodable at '=' after layer 0"
measure = "probe_accuracy"
site = "resid_post@0"
compare = ">="
threshold = 0.8

[[claim]]
name = "the answer is not decodable at the embedding of '='"
measure = "probe_accuracy"
site = "embed"
compare = "<="
threshold = 0.1

[[claim]]
name = "5 key frequencies carry >= 80% of the logits' Fourier power"
measure = "fourier_key_share"
p = 53
k = 5
source = "logits"
split = "test"
compare = ">="
threshold = 0.8
'''
path = WORK / "modadd_claims.toml"
path.write_text(text)
spec = load_hypotheses(path)  # validates every table and key before anything runs
[(c.name, c.measure, c.describe()) for c in spec.claims]

# %% [markdown]
# Validation names the file, the line and the key. A typo in a claim's key is refused before any
# model is loaded:

# %%
bad = WORK / "typo.toml"
bad.write_text(text.replace('site = "embed"', 'sitee = "embed"'))
try:
    load_hypotheses(bad)
except ConfigError as err:
    print(err)

# %% [markdown]
# ## Run it from Python
#
# `run` loads the model, captures what the claims need (once, cached), measures each claim with
# its kind and judges it. The result displays itself as the report's claims table, followed by
# each claim's own plots:

# %%
result = run(spec)
result

# %% [markdown]
# One line per claim for a terminal, and the verdicts as a DataFrame:

# %%
print(repr(result))
print("\n".join(result.lines()))

# %%
result.to_frame()[["claim", "verdict", "effect", "ci_low", "ci_high", "claimed", "p_holm", "n"]]

# %% [markdown]
# A single claim is a result too, and `plot()` gives its kind's plot as a matplotlib figure (here
# the Fourier power of the logits by frequency):

# %%
result.claims[0]

# %%
result.claims[2].plot()

# %% [markdown]
# ## Run it from the CLI
#
# The same file with `probekit test` (here through `python -m probekit.cli`, so it uses this
# kernel's environment): one line per claim, exit status 0 iff every claim passes, and with
# `--out` the HTML report and `report.json`.

# %%
cli = subprocess.run(
    [sys.executable, "-m", "probekit.cli", "test", str(path), "--out", str(WORK / "report"),
     "--quiet"],
    capture_output=True, text=True,
)
print(cli.stdout)
print("exit status:", cli.returncode)
sorted(p.name for p in (WORK / "report").iterdir())

# %% [markdown]
# A claim that does not hold FAILs and the command exits 1: claim the embedding *does* carry the
# answer.

# %%
flipped = WORK / "flipped.toml"
flipped.write_text(text.replace(
    'name = "the answer is not decodable at the embedding of \'=\'"\nmeasure = "probe_accuracy"\n'
    'site = "embed"\ncompare = "<="\nthreshold = 0.1',
    'name = "the answer is decodable at the embedding of \'=\'"\nmeasure = "probe_accuracy"\n'
    'site = "embed"\ncompare = ">="\nthreshold = 0.5'))
cli_flipped = subprocess.run(
    [sys.executable, "-m", "probekit.cli", "test", str(flipped), "--quiet"],
    capture_output=True, text=True,
)
print(cli_flipped.stdout)
print("exit status:", cli_flipped.returncode)

# %%
assert result.passed and [c.verdict for c in result.claims] == ["PASS", "PASS", "PASS"]
assert cli.returncode == 0 and (WORK / "report" / "report.html").is_file()
assert cli_flipped.returncode == 1
assert "FAIL         the answer is decodable at the embedding" in cli_flipped.stdout
