import json
import os

import numpy as np
import pytest

from probekit.models import save_checkpoint
from tests.conftest import TINY_CONFIGS, random_sequences


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Suite runs cache activations under PROBEKIT_CACHE: keep them out of the user's cache."""
    old = os.environ.get("PROBEKIT_CACHE")
    os.environ["PROBEKIT_CACHE"] = str(tmp_path_factory.mktemp("probekit_cache"))
    yield
    if old is None:
        os.environ.pop("PROBEKIT_CACHE", None)
    else:
        os.environ["PROBEKIT_CACHE"] = old


SUITE = """
[suite]
name = "tiny"
description = "planted vs null labels on a tiny random model"

[model]
checkpoint = "ckpt"

[data]
file = "data.jsonl"
label = "planted"
train_split = "train"
test_split = "test"
ood_splits = ["ood"]
control_column = "last"

[capture]
include_embed = true
batch_size = 16
padding_side = "left"

[[probe]]
kind = "logistic"
Cs = 3
cv = 3
control = true

[[probe]]
kind = "logistic"
label = "null"
Cs = 3
cv = 3

[[probe]]
kind = "diffmeans"

[stats]
n_permutations = 99
n_bootstrap = 1000
"""


@pytest.fixture(scope="session")
def suite_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    cfg = TINY_CONFIGS["ln_mha"]
    from probekit.models import build_model

    save_checkpoint(build_model(cfg), cfg, root / "ckpt")
    rng = np.random.default_rng(0)
    seqs = random_sequences(180, cfg.d_vocab, lo=3, hi=10, seed=11)
    rows = []
    for i, s in enumerate(seqs):
        split = "ood" if i >= 150 else ("test" if i % 3 == 0 else "train")
        # planted: parity of the last token id (readable from its embedding at every layer)
        rows.append({"tokens": s, "planted": int(s[-1] % 2), "null": int(rng.integers(0, 2)),
                     "last": int(s[-1]), "split": split})
    (root / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (root / "suite.toml").write_text(SUITE)
    return root
