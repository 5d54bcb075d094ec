"""What a measurement kind declares at registration: a testbed kind says what it needs."""

from dataclasses import dataclass

from probekit.hypotheses.registry import (
    MEASUREMENT_KINDS,
    get_kind,
    kinds_needing_a_testbed,
    register_measurement,
)


@dataclass(frozen=True, kw_only=True)
class _Spec:
    x: int = 0


def test_testbed_kinds_are_declared_by_the_kinds_and_match_the_diagnosis_table():
    from probekit.diagnosis.real_models import TESTBED_KINDS

    assert kinds_needing_a_testbed() == TESTBED_KINDS  # one declaration: the diagnosis reads the kinds'
    assert get_kind("fourier_gini").needs_testbed.startswith("the Fourier key frequencies")
    assert get_kind("probe_accuracy").needs_testbed == ""
    with MEASUREMENT_KINDS.temporary():
        @register_measurement("toy_grid_kind", spec=_Spec, needs_testbed="a toy grid")
        def toy(spec, ctx):
            return None

        assert kinds_needing_a_testbed()["toy_grid_kind"] == "a toy grid"
    assert "toy_grid_kind" not in kinds_needing_a_testbed()
