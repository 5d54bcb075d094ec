"""util.list_option: the distinct / in-range rule of list options, and its Distinct constraint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest

from probekit.errors import ConfigError
from probekit.util.constraints import ConstraintError, Distinct, Validated
from probekit.util.list_option import check_list_option, repeated


def test_repeated_lists_each_repeated_value_once_in_order():
    assert repeated([0, 1, 0, 2, 1, 0]) == [0, 1]
    assert repeated(["a", "b"]) == []
    assert repeated([]) == []
    assert repeated([1, True]) == []  # a bool is not its int here (repr differs)


@pytest.mark.parametrize(("values", "kwargs", "message"), [
    ([0, 0], {"what": "block index"},
     "--layers [0, 0]: block index 0 is given twice; give each block index once"),
    ([0, 2, 1, 2], {"what": "block index", "low": 0, "high": 3},
     "block index 2 is given twice"),
    ([0, 5], {"what": "block index", "low": 0, "high": 2, "note": "the model has 2 blocks"},
     "--layers [0, 5]: block index 5 is outside 0..1 (the model has 2 blocks); give values in 0..1"),
    ([-1], {"what": "block index", "low": 0},
     "--layers [-1]: block index -1 is outside 0..inf"),
    ([0], {"what": "block index", "low": 0, "high": 0},
     "no block index is valid, the range 0..-1 is empty"),
])
def test_check_list_option_refuses_with_the_option_value_and_range(values, kwargs, message):
    with pytest.raises(ConfigError) as err:
        check_list_option("--layers", values, **kwargs)
    assert message in str(err.value)


def test_check_list_option_accepts_distinct_values_in_range():
    assert check_list_option("--layers", (1, 0), low=0, high=2) == [1, 0]
    assert check_list_option("--kinds", []) == []


@dataclass(frozen=True, kw_only=True)
class _Spec(Validated):
    layers: Annotated[tuple[int, ...], Distinct()] = ()


def test_distinct_constraint_is_the_same_rule_declared():
    assert _Spec(layers=(2, 0, 1)).layers == (2, 0, 1)
    with pytest.raises(ConstraintError) as err:
        _Spec(layers=(0, 0))
    assert str(err.value) == "_Spec.layers must be distinct (each value once), got (0, 0)"
    assert err.value.key == "layers"
