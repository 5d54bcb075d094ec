"""One p-value format and plain tick labels (issue 57)."""

import pytest

from probekit.report.numbers import format_p, p_floor, plain_number


@pytest.mark.parametrize(("p", "floor", "text"), [
    (1 / 1001, 1 / 1001, "< 0.001"),          # the floor of 1,000 permutations
    (1 / 20001, 1 / 20001, "< 0.00005"),      # adaptive: 20,000 permutations
    (4 / 1001, 1 / 1001, "0.004"),            # Holm over 4 markers at the floor: a number
    (0.012345, 1 / 1001, "0.0123"),
    (0.38846, None, "0.388"),
    (1.0, 1 / 1001, "1"),
    (0.5, None, "0.5"),
    (float("nan"), None, "-"),
    (None, None, "-"),
])
def test_format_p_three_significant_digits_and_the_floor(p, floor, text):
    assert format_p(p, floor) == text


def test_p_floor_is_one_over_permutations_plus_one():
    assert p_floor(999) == 1 / 1000
    assert p_floor(None) is None and p_floor(0) is None


@pytest.mark.parametrize(("v", "text"), [
    (1250.0, "1250"), (1234567.0, "1230000"), (0.0005, "0.0005"), (-0.075, "-0.075"),
    (0.1 + 0.2, "0.3"), (-1e-20, "-0.00000000000000000001"), (0.0, "0"), (2.5, "2.5"),
    (-0.0, "0"),
])
def test_plain_number_never_writes_an_exponent(v, text):
    assert plain_number(v) == text
    assert "e" not in plain_number(v)
