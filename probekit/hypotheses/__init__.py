"""Hypothesis tests on specific models: ``probekit test circuits/*.toml``.

A hypothesis file names a model and data (as a suite does) and ``[[claim]]``s: a registered
measurement kind, a comparison and a threshold. Each claim gets PASS / FAIL / INCONCLUSIVE from
a bootstrap CI (or a permutation test against the kind's control), Holm-adjusted over the file.
Exports are lazy (:mod:`probekit.lazy`): loading a file does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "Measurement": ".measurement",
    "MeasurementKind": ".registry",
    "get_kind": ".registry",
    "register_measurement": ".registry",
    "registered_kinds": ".registry",
    "HypothesisResult": ".runner",
    "run": ".runner",
    "Claim": ".spec",
    "HypothesisFile": ".spec",
    "load_hypotheses": ".spec",
    "ClaimResult": ".verdict",
    "judge_all": ".verdict",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .measurement import Measurement as Measurement
    from .registry import MeasurementKind as MeasurementKind
    from .registry import get_kind as get_kind
    from .registry import register_measurement as register_measurement
    from .registry import registered_kinds as registered_kinds
    from .runner import HypothesisResult as HypothesisResult
    from .runner import run as run
    from .spec import Claim as Claim
    from .spec import HypothesisFile as HypothesisFile
    from .spec import load_hypotheses as load_hypotheses
    from .verdict import ClaimResult as ClaimResult
    from .verdict import judge_all as judge_all
