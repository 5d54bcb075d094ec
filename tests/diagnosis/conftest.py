"""Diagnosis tests: the report's calibration section runs, at a size fit for a unit test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _small_report_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every diagnosis report in these tests simulates its calibration 4 times, not 200
    (``tests/diagnosis/test_calibrate.py`` checks the calibration itself)."""
    from probekit.diagnosis import calibration

    monkeypatch.setattr(calibration, "REPORT_SIMULATIONS", 4)
