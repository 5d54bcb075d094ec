"""HE of one composition at one block: the HE result's row, its ratio bootstrap, applicability."""

import re

import numpy as np
import pytest

from probekit.errors import ConfigError, NotApplicableError
from probekit.homomorphism import PARSE_COLUMNS, HEConfig, measure_he
from probekit.homomorphism.layer_he import check_compositions, layer_he
from probekit.stats.bootstrap import bootstrap_indices
from tests.hypotheses.helpers import FakeContext, FakeData, FakeSuite, examples


def _ctx(**options):
    from probekit.models import build_model
    from probekit.testbeds import get_task

    cfg = dict(n_noise=0, max_samples=40, ood_lengths=(5,), n_ood_per_length=10, n_ood_combo=10,
               seed=0)
    task = get_task("scan", **{**cfg, **options})
    model = build_model(task.model_config(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32,
                                          seed=0))
    ds = task.splits()["train"]
    ex = examples(ds.tokens, {c: ds.metadata[c] for c in PARSE_COLUMNS},
                  {"train": np.arange(len(ds.tokens))})
    ex.vocab = task.vocab
    return FakeContext(model=model, examples=ex, suite=FakeSuite(data=FakeData(prompt_only=False)))


def test_layer_he_is_the_he_results_row_with_a_ratio_bootstrap():
    ctx = _ctx()
    cfg = HEConfig(families=("affine",), solver="closed_form_ridge")
    got = layer_he(ctx, "train", "modifier", 0, cfg, n_bootstrap=1000, seed=2)
    _, results = measure_he(ctx, "train", ("modifier",), cfg)
    ref = results["modifier"]
    row = ref.layers.index(0)
    np.testing.assert_allclose(got.pair_he, ref.pair_he[row], rtol=1e-9)
    assert got.he == pytest.approx(float(ref.he[row])) and got.n_scored == ref.n_scored
    assert got.he_normalised == pytest.approx(ref.pair_he[row].sum() / ref.pair_sq_dev[row].sum())
    b = bootstrap_indices(got.pair_he.size, 1000, 2)[5]
    assert got.normalised_resamples[5] == pytest.approx(
        ref.pair_he[row][b].sum() / ref.pair_sq_dev[row][b].sum(), rel=1e-9)
    with pytest.raises(ConfigError, match="layer 7 not measured"):
        layer_he(ctx, "train", "modifier", 7, cfg, n_bootstrap=1000, seed=0)


def test_compositions_that_do_not_occur_are_not_applicable():
    ex = examples([[1, 2]], {"label": [0]}, {"train": [0]})
    with pytest.raises(NotApplicableError, match="SCAN-style task"):
        check_compositions(ex, "train", "modifier")
    with pytest.raises(NotApplicableError, match="no modifiers"):
        check_compositions(_ctx(modifiers=(), held_out_combos=()).examples, "train", "modifier")
    with pytest.raises(NotApplicableError, match="single clauses"):
        check_compositions(_ctx(train_clauses=(1,)).examples, "train", "sequence")


def test_too_few_pairs_per_group_is_not_applicable_to_that_model():
    from probekit.errors import DataError
    from probekit.homomorphism.measure import TooFewPairsError

    # a model trained on single clauses only: 11 commands, 7 with a modifier (jump thrice held
    # out), so one operator per modifier has fewer than 2 scored pairs in a group
    ctx = _ctx(train_clauses=(1,))
    cfg = HEConfig(families=("affine",), solver="closed_form_ridge", parts="separate")
    with pytest.raises(TooFewPairsError, match="needs >= 2 of each") as err:
        measure_he(ctx, "train", ("modifier",), cfg)
    assert isinstance(err.value, DataError)  # still a data error outside the kind
    assert "np.str_" not in str(err.value)  # the group is named as the user wrote it
    assert re.search(r"group '(twice|thrice)' has \d+ fit", str(err.value))
    with pytest.raises(NotApplicableError, match=r"modifier HE \(separate parts\) on the 'train'"):
        layer_he(ctx, "train", "modifier", 0, cfg, n_bootstrap=1000, seed=0)
    # [C]'s one shared operator is defined on the same pairs
    same = HEConfig(families=("affine",), solver="closed_form_ridge")
    assert layer_he(ctx, "train", "modifier", 0, same, n_bootstrap=1000, seed=0).n_scored >= 1
