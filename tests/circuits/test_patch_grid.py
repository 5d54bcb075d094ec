"""PatchOptions: the patching family's shared options, built and validated once (issue #33 part 5)."""

from functools import partial

import pytest
import torch

from probekit.circuits import PatchOptions, activation_patching, attribution_patching, logit_diff
from probekit.errors import ConfigError
from tests.circuits.planted import planted_model

CLEAN = [[0, 1, 2, 3], [1, 2, 3, 4]]
CORRUPT = [[5, 1, 2, 3], [4, 2, 3, 4]]
METRIC = partial(logit_diff, answer=torch.tensor([0, 1]), foil=torch.tensor([5, 4]))


@pytest.fixture(scope="module")
def model():
    return planted_model()


def test_an_options_object_equals_the_keyword_call(model):
    opts = PatchOptions(kind="attn_z", by=("layer", "pos", "head"), layers=(1,), batch_size=3)
    by_object = activation_patching(model, CLEAN, CORRUPT, METRIC, opts)
    by_keywords = activation_patching(model, CLEAN, CORRUPT, METRIC, kind="attn_z",
                                      by=["layer", "pos", "head"], layers=[1], batch_size=3)
    torch.testing.assert_close(by_object.per_pair, by_keywords.per_pair, rtol=0, atol=0,
                               equal_nan=True)
    assert by_object.axes == ("layer", "pos", "head") and by_object.labels["layer"] == ["1"]
    # the attribution estimate reads the same object (window 1, batch_size unused)
    est = attribution_patching(model, CLEAN, CORRUPT, METRIC, opts)
    assert est.values.shape == by_object.values.shape


def test_keywords_replace_fields_of_the_object(model):
    base = PatchOptions(kind="resid_pre", layers=(0,))
    res = activation_patching(model, CLEAN, CORRUPT, METRIC, base, layers=[1], direction="noise")
    assert res.labels["layer"] == ["1"] and res.direction == "noise"
    assert PatchOptions.build(base, window=2) == PatchOptions(kind="resid_pre", layers=(0,), window=2)
    assert base.layers == (0,)  # frozen: build returns a new object


@pytest.mark.parametrize(("fields", "message"), [
    ({"kind": "resid_pots"}, r"patching kind 'resid_pots' not supported; use one of \["),
    ({"kind": "resid_pre", "by": ("layer", "head")},
     r"by=\['layer', 'head'\] does not fit kind 'resid_pre'; use one of \[\['layer', 'pos'\]\]"),
    ({"direction": "up"}, r"PatchOptions.direction must be one of \['denoise', 'noise'\] \('denoise': clean"),
    ({"window": 0}, r"PatchOptions.window must be >= 1 \(blocks patched per cell\), got 0"),
    ({"batch_size": 0}, r"batch_size must be >= 1 .*got 0"),
    ({"padding_side": "top"}, r"PatchOptions.padding_side must be one of \['left', 'right'\], got 'top'"),
])
def test_a_bad_field_is_named_with_its_fix(fields, message):
    with pytest.raises(ConfigError, match=message):
        PatchOptions.build(**fields)


def test_an_unknown_keyword_names_the_closest_option(model):
    with pytest.raises(ConfigError, match=r"unknown patching option 'layer'; did you mean 'layers'\?"):
        activation_patching(model, CLEAN, CORRUPT, METRIC, layer=[0])


def test_attribution_refuses_a_window(model):
    with pytest.raises(ConfigError, match="window = 2: attribution patching estimates single-block"):
        attribution_patching(model, CLEAN, CORRUPT, METRIC, PatchOptions(window=2))


def test_layers_and_window_follow_the_list_option_rule(model):
    """A block twice is refused (not patched twice); a window beyond the model is refused, not
    clipped; a window of every block is the longest accepted."""
    from probekit.circuits.patch_grid import check_window, prepare_grid

    with pytest.raises(ConfigError, match=r"layers \[0, 0\]: block index 0 is given twice"):
        PatchOptions(layers=(0, 0))
    n = int(model.cfg.n_layers)
    with pytest.raises(ConfigError, match=rf"window = {n + 1} exceeds the model's {n} block\(s\)"):
        prepare_grid(model, CLEAN, CORRUPT, PatchOptions(window=n + 1))
    assert prepare_grid(model, CLEAN, CORRUPT, PatchOptions(window=n)).window == n
    assert check_window(1, 1) == 1
    with pytest.raises(ConfigError, match="give window in 1..1"):
        check_window(100, 1)
