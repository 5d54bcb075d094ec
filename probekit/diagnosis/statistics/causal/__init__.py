"""Causal evidence on a diagnosis table: intervention arms, 2SLS and mediation.

The predictive analysis (:func:`probekit.diagnosis.marker_analysis`) says whether a marker
*predicts* the outcome beyond the design; these estimates ask whether it *causes* it, on the same
table, with the same design and resampling unit (``docs/diagnosis.md``, "Causal evidence"):

- :func:`iv_estimate` (:mod:`.iv`): the marker's effect on the outcome by two-stage least
  squares with an intervention's strength as the instrument, its CR1 SE, the first-stage F with
  the weak-instrument warning, and the Anderson-Rubin p and CI with the design's resamples;
- :func:`mediation` (:mod:`.mediation`): knob -> marker -> outcome, indirect / direct / total
  effects and the proportion mediated, with bootstrap CIs on the design's unit;
- :func:`causal_evidence` (:mod:`.arms`): per intervention arm (``[population] interventions``)
  the first stage, the reduced form, the IV estimate and the arm's mediation, and per
  ``[diagnosis] mediation`` pair the mediation; the report's "Causal evidence" blocks.
"""

from .arms import CausalEvidence, causal_evidence
from .design import CausalDesign, CoefficientTest, build_design, coefficient_test
from .iv import IVEstimate, iv_estimate, two_stage_least_squares
from .mediation import Mediation, group_bootstrap_counts, mediation, stratified_bootstrap_counts

__all__ = [
    "CausalDesign",
    "CausalEvidence",
    "CoefficientTest",
    "IVEstimate",
    "Mediation",
    "build_design",
    "causal_evidence",
    "coefficient_test",
    "group_bootstrap_counts",
    "iv_estimate",
    "mediation",
    "stratified_bootstrap_counts",
    "two_stage_least_squares",
]
