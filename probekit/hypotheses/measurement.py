"""What a measurement kind returns: per-example values, or an estimate with its resamples.

A :class:`Measurement` carries the numbers behind a claim's verdict and nothing else; the
verdict (CI, p-value, PASS / FAIL / INCONCLUSIVE) is :mod:`probekit.hypotheses.verdict`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError, NonFiniteError

__all__ = ["Measurement"]


def _finite(name: str, value: np.ndarray | None) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise NonFiniteError(
            f"measurement {name}[{bad}] is {arr[bad]}; a measurement kind must return finite "
            "numbers (drop undefined examples before returning)"
        )
    return arr


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """The numbers one measurement kind produced for one claim.

    Give ``values`` (one number per unit: the estimate is their mean, resampled by the
    bootstrap over units) and/or ``estimate`` with ``resamples`` (the kind's own bootstrap
    distribution of a statistic that is not a mean, e.g. a ratio of sums; used for the CI when
    given). A control for
    ``compare = "greater_than_control"`` is either ``control`` (per-unit values paired with
    ``values``: sign-flip permutation test of the mean difference) or ``null`` (the statistic's
    distribution under the control, e.g. refits on shuffled labels: permutation p-value).

    Attributes:
        metric: what the estimate is (``"accuracy"``, ``"normalised logit difference"`` ...).
        values: per-unit values, shape ``(n,)``.
        estimate: the statistic (default ``mean(values)``).
        resamples: bootstrap replicates of ``estimate`` (``(B,)``), when ``values`` is not given.
        control: per-unit control values paired with ``values``.
        null: the statistic's control / permutation distribution ``(N,)``.
        n: number of units behind the estimate.
        unit: what a unit is (``"test examples"``, ``"prompt pairs"``).
        method: how it was measured (one line, for the report).
        details: JSON-ready extra numbers for ``report.json`` (e.g. the key frequencies).
        blocks: report blocks (:mod:`probekit.report.blocks`) shown under the claim.
    """

    metric: str
    values: np.ndarray | None = None
    estimate: float | None = None
    resamples: np.ndarray | None = None
    control: np.ndarray | None = None
    null: np.ndarray | None = None
    n: int = 0
    unit: str = "examples"
    method: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    blocks: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        """Check the shape of what was given; values and resamples must be finite."""
        values = _finite("values", self.values)
        resamples = _finite("resamples", self.resamples)
        control = _finite("control", self.control)
        null = _finite("null", self.null)
        if values is None and resamples is None:
            raise DataError(
                "a Measurement needs values (per-unit numbers) or estimate + resamples (a "
                "bootstrap distribution; values may come too, for a paired control)"
            )
        if values is not None and values.size < 2:
            raise DataError(f"a Measurement needs >= 2 values to resample, got {values.size}")
        if resamples is not None and self.estimate is None:
            raise DataError("Measurement(resamples=...) needs the estimate they resample")
        if control is not None and (values is None or control.shape != values.shape):
            raise DataError(
                "Measurement.control must pair with values (same length); give null= for a "
                "control distribution of the statistic instead"
            )
        if null is not None and null.size < 1:
            raise DataError("Measurement.null is empty; give >= 1 control replicate")
        est = float(values.mean()) if self.estimate is None else float(self.estimate)
        if not np.isfinite(est):
            raise NonFiniteError(f"measurement estimate is {est}; expected a finite number")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "resamples", resamples)
        object.__setattr__(self, "control", control)
        object.__setattr__(self, "null", null)
        object.__setattr__(self, "estimate", est)
        if self.n == 0:
            object.__setattr__(self, "n", int(values.size) if values is not None else 0)

    @property
    def has_control(self) -> bool:
        """Whether a control (paired values or a null distribution) was measured."""
        return self.control is not None or self.null is not None
