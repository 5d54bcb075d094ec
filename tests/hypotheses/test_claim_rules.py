"""Claim keys refused when the file loads, with the run's own rules (issue 59 item 2).

``k`` of the Fourier kinds against ``p`` (:func:`probekit.grokking.fourier.check_key_count`, the
rule ``key_frequencies`` applies at the run), a zero steering strength (the identity: no
intervention, so a claim on it could only FAIL), and split keys naming a split the examples do
not have (:func:`probekit.suites.spec.check_split_keys`).
"""

from __future__ import annotations

import numpy as np
import pytest

from probekit.errors import ConfigError, KeyedValueError
from probekit.grokking.fourier import check_key_count, key_frequencies
from probekit.hypotheses.kinds.circuit_faithfulness import CircuitFaithfulnessSpec
from probekit.hypotheses.kinds.fourier_key_share import FourierKeyShareSpec
from probekit.hypotheses.kinds.necessity import NecessitySpec
from probekit.suites.spec import DataSpec, SuiteError, check_split_keys, split_names
from probekit.util.constraints import ConstraintError


@pytest.mark.parametrize(("p", "k", "ok"), [(53, 26, True), (53, 27, False), (5, 2, True),
                                            (5, 3, False), (53, 0, False), (53, -1, False)])
def test_key_count_rule_is_the_runs(p, k, ok):
    """The spec refuses exactly the k that key_frequencies refuses on p's (p-1)//2 + 1 powers."""
    power = np.arange(1.0, (p - 1) // 2 + 2)
    if ok:
        assert FourierKeyShareSpec(p=p, k=k).k == k
        assert len(key_frequencies(power, k)) == k
        return
    with pytest.raises(ConfigError, match=f"k={k}: choose 1 <= k <= {(p - 1) // 2}"):
        key_frequencies(power, k)
    with pytest.raises(KeyedValueError) as err:
        FourierKeyShareSpec(p=p, k=k)
    assert err.value.key == "k"


def test_key_count_rejects_a_bool():
    with pytest.raises(ConfigError):
        check_key_count(True, 5)


def test_necessity_key_frequencies_k_against_p():
    with pytest.raises(KeyedValueError, match=r"k = 30 with p = 53: k=30: choose 1 <= k <= 26"):
        NecessitySpec(substrate="key_frequencies", p=53, k=30)
    with pytest.raises(ConstraintError, match="NecessitySpec.k must be >= 1"):
        NecessitySpec(site="resid_post@0", k=0)
    assert NecessitySpec(substrate="key_frequencies", p=53, k=26).k == 26


def test_steering_by_zero_is_refused_any_other_strength_kept():
    with pytest.raises(KeyedValueError) as err:
        NecessitySpec(site="resid_post@0", method="steer", strength=0.0)
    assert err.value.key == "strength" and "strength = 0 steers by zero standard deviations" in str(err.value)
    for strength in (-1.5, 1e-3, 4.0, None):
        assert NecessitySpec(site="resid_post@0", method="steer", strength=strength).method == "steer"


def test_faithfulness_k_and_curve_rules():
    with pytest.raises(ConstraintError, match=r"k must be >= 1 \(edges kept\), got 0"):
        CircuitFaithfulnessSpec(k=0)
    with pytest.raises(ConstraintError, match="curve must be distinct"):
        CircuitFaithfulnessSpec(k=5, curve=(10, 10))


def test_split_keys_name_the_examples_splits():
    data = DataSpec(label="y", ood_splits=("ood_len",))
    assert split_names(data) == ("train", "test", "ood_len", "ood:ood_len")
    for split in ("train", "test", "ood_len", "ood:ood_len"):
        check_split_keys(NecessitySpec(site="resid_post@0", split=split), data, str)
    with pytest.raises(SuiteError) as err:
        check_split_keys(NecessitySpec(site="resid_post@0", also_split="ood_lne"), data,
                         lambda key: f"c.toml:7: [claim] {key}")
    assert str(err.value).startswith("c.toml:7: [claim] also_split = 'ood_lne': not a split of the "
                                     "examples (did you mean 'ood_len'?); the splits are")
    check_split_keys(NecessitySpec(site="resid_post@0", also_split=None), data, str)  # unset


def test_necessity_keys_are_split_by_substrate():
    """Each substrate declares its own keys; a key of another substrate is refused, not ignored."""
    import dataclasses

    from probekit.hypotheses.kinds.necessity import SUBSTRATES

    assert [f.name for f in dataclasses.fields(NecessitySpec)][:8] == [
        "substrate", "site", "label", "n_directions", "C", "units", "p", "k"]  # the file order
    assert NecessitySpec(substrate="key_frequencies", p=53, k=5).substrate_keys() == {"p": 53, "k": 5}
    assert NecessitySpec(substrate="units", site="embed", units=(3, 1)).substrate_keys() == {
        "site": "embed", "units": (3, 1)}
    assert set(SUBSTRATES) == {"probe_direction", "units", "key_frequencies", "modifier_subspace"}
    with pytest.raises(KeyedValueError, match=r"units = \(1, 2\) is a key of substrate 'units', "
                                              r"not of 'probe_direction'") as err:
        NecessitySpec(site="resid_post@0", units=(1, 2))
    assert err.value.key == "units"
    with pytest.raises(KeyedValueError, match="k = 4 is a key of substrate 'key_frequencies' / "
                                              "'modifier_subspace'"):
        NecessitySpec(site="resid_post@0", k=4)
    with pytest.raises(ConstraintError, match=r"NecessitySpec.C must be > 0 \(inverse regularisation\)"):
        NecessitySpec(site="resid_post@0", C=0.0)
