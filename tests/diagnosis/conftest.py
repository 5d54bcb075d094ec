"""Diagnosis tests: the report's calibration section runs, at a size fit for a unit test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _small_report_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every diagnosis report in these tests simulates its calibration 4 times, not 200
    (``tests/diagnosis/statistics/test_calibrate.py`` checks the calibration itself), and its MDE 100 times."""
    from probekit.diagnosis import mde
    from probekit.diagnosis.statistics import calibration

    monkeypatch.setattr(calibration, "REPORT_SIMULATIONS", 4)
    # the report's simulated MDE at 100 populations, not 400 (tests/diagnosis/test_mde.py and
    # test_power.py check the simulation itself)
    monkeypatch.setattr(mde, "MDE_SIMULATIONS", 100)
