"""Generalization diagnosis: which internal markers predict OOD success, beyond the design.

Statistics on a marker table (one row per model; definitions in docs/diagnosis.md):
:func:`marker_analysis` (marginal, partial and leave-one-group-out association per marker, with
verdicts), :func:`calibrate` (its size, power and CI coverage simulated on the population's own
design: what the population can detect), :func:`plan_power` (a planned grid's power curve and
minimum detectable effect before any training: ``probekit diagnose --plan``),
:func:`granulated_kendall_tau` and
:func:`conditional_mutual_information` (Jiang et al. 2020), :func:`level_mean_r2` (An & Du's
level-mean unit), :func:`causal_evidence` (intervention arms: first stage, reduced form, 2SLS
with Anderson-Rubin inference; mediation; :mod:`probekit.diagnosis.causal`),
:func:`censoring_sensitivity` (a censored crossing step: Cox hazards and the
verdicts over censoring values), :func:`early_warning` (markers at
each series step), :func:`compare_populations` (two populations: each marker's partial effect
in both and the marker x population interaction test) and :func:`diagnosis_blocks` (report
blocks), all pure numpy / scipy (marker families over layers: :mod:`.families`); and the
engine above suites and hypotheses: :func:`load_diagnosis` (a diagnosis file: ``[population]``,
``[[marker]]``, ``[diagnosis]``), :func:`diagnose` (train or find the population, measure every
marker per checkpoint through the executor, analyse, write ``markers.csv`` and the report) and
:func:`check_diagnosis`; :func:`read_marker_table` (a pandas DataFrame) and
:func:`diagnose_table` analyse an existing table (``[population] table = FILE``, ``probekit
diagnose --table``, or a DataFrame). Exports are lazy
(:mod:`probekit.lazy`).
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "MarkerAnalysis": ".analysis",
    "MarkerStats": ".analysis",
    "marker_analysis": ".analysis",
    "compare_populations": ".compare",
    "PopulationComparison": ".compare",
    "Calibration": ".calibration",
    "calibrate": ".calibration",
    "PlannedDesign": ".plan",
    "PowerPlan": ".plan",
    "plan_power": ".plan",
    "MarkerTable": ".table",
    "as_marker_table": ".table",
    "CMIResult": ".granulated",
    "GranulatedTau": ".granulated",
    "conditional_mutual_information": ".granulated",
    "granulated_kendall_tau": ".granulated",
    "LevelMeanR2": ".levels",
    "level_mean_r2": ".levels",
    "CensoredCrossing": ".censoring",
    "censor_crossing": ".censoring",
    "CensoringSensitivity": ".survival",
    "censoring_sensitivity": ".survival",
    "EarlyWarning": ".early",
    "early_warning": ".early",
    "diagnosis_blocks": ".blocks",
    "CausalEvidence": ".causal",
    "causal_evidence": ".causal",
    "DiagnosisResult": ".runner",
    "check_diagnosis": ".runner",
    "diagnose": ".runner",
    "DiagnosisFile": ".spec",
    "load_diagnosis": ".spec",
    "read_marker_table": ".table_io",
    "diagnose_table": ".table_diagnosis",
    "load_table_diagnosis": ".table_diagnosis",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .analysis import MarkerAnalysis as MarkerAnalysis
    from .analysis import MarkerStats as MarkerStats
    from .analysis import marker_analysis as marker_analysis
    from .blocks import diagnosis_blocks as diagnosis_blocks
    from .calibration import Calibration as Calibration
    from .calibration import calibrate as calibrate
    from .causal import CausalEvidence as CausalEvidence
    from .causal import causal_evidence as causal_evidence
    from .censoring import CensoredCrossing as CensoredCrossing
    from .censoring import censor_crossing as censor_crossing
    from .compare import PopulationComparison as PopulationComparison
    from .compare import compare_populations as compare_populations
    from .early import EarlyWarning as EarlyWarning
    from .early import early_warning as early_warning
    from .granulated import CMIResult as CMIResult
    from .granulated import GranulatedTau as GranulatedTau
    from .granulated import conditional_mutual_information as conditional_mutual_information
    from .granulated import granulated_kendall_tau as granulated_kendall_tau
    from .levels import LevelMeanR2 as LevelMeanR2
    from .levels import level_mean_r2 as level_mean_r2
    from .plan import PlannedDesign as PlannedDesign
    from .plan import PowerPlan as PowerPlan
    from .plan import plan_power as plan_power
    from .runner import DiagnosisResult as DiagnosisResult
    from .runner import check_diagnosis as check_diagnosis
    from .runner import diagnose as diagnose
    from .spec import DiagnosisFile as DiagnosisFile
    from .spec import load_diagnosis as load_diagnosis
    from .survival import CensoringSensitivity as CensoringSensitivity
    from .survival import censoring_sensitivity as censoring_sensitivity
    from .table import MarkerTable as MarkerTable
    from .table import as_marker_table as as_marker_table
    from .table_diagnosis import diagnose_table as diagnose_table
    from .table_diagnosis import load_table_diagnosis as load_table_diagnosis
    from .table_io import read_marker_table as read_marker_table
