import os

import pytest

from tests.conftest import write_tiny_suite


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
    return write_tiny_suite(tmp_path_factory.mktemp("suite"), SUITE)
