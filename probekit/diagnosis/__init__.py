"""Generalization diagnosis: which internal markers predict OOD success, beyond the design.

Statistics on a marker table (one row per model; definitions in docs/diagnosis.md):
:func:`marker_analysis` (marginal, partial and leave-one-group-out association per marker, with
verdicts), :func:`calibrate` (its size, power and CI coverage simulated on the population's own
design: what the population can detect), :func:`plan_power` (a planned grid's power curve and
minimum detectable effect before any training: ``probekit diagnose --plan``),
:func:`granulated_kendall_tau` and
:func:`conditional_mutual_information` (Jiang et al. 2020), :func:`level_mean_r2` (An & Du's
level-mean unit), :func:`causal_evidence` (intervention arms: first stage, reduced form, 2SLS
with Anderson-Rubin inference; mediation; :mod:`probekit.diagnosis.statistics.causal`),
:func:`censoring_sensitivity` (a censored crossing step: Cox hazards and the
verdicts over censoring values), :func:`early_warning` (markers at
each series step), :func:`compare_populations` (two populations: each marker's partial effect
in both and the marker x population interaction test) and :func:`diagnosis_blocks` (report
blocks), all pure numpy / scipy (marker families over layers: :mod:`.statistics.families`); and the
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
    "MarkerAnalysis": ".statistics.analysis",
    "MarkerStats": ".statistics.analysis",
    "marker_analysis": ".statistics.analysis",
    "compare_populations": ".statistics.compare",
    "PopulationComparison": ".statistics.compare",
    "Calibration": ".statistics.calibration",
    "calibrate": ".statistics.calibration",
    "PlannedDesign": ".plan",
    "PowerPlan": ".plan",
    "plan_power": ".plan",
    "MarkerTable": ".statistics.table",
    "as_marker_table": ".statistics.table",
    "CMIResult": ".statistics.granulated",
    "GranulatedTau": ".statistics.granulated",
    "conditional_mutual_information": ".statistics.granulated",
    "granulated_kendall_tau": ".statistics.granulated",
    "LevelMeanR2": ".statistics.levels",
    "level_mean_r2": ".statistics.levels",
    "CensoredCrossing": ".statistics.survival",
    "censor_crossing": ".statistics.survival",
    "CensoringSensitivity": ".statistics.survival",
    "censoring_sensitivity": ".statistics.survival",
    "EarlyWarning": ".statistics.early",
    "early_warning": ".statistics.early",
    "diagnosis_blocks": ".statistics.blocks",
    "CausalEvidence": ".statistics.causal",
    "causal_evidence": ".statistics.causal",
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
    from .plan import PlannedDesign as PlannedDesign
    from .plan import PowerPlan as PowerPlan
    from .plan import plan_power as plan_power
    from .runner import DiagnosisResult as DiagnosisResult
    from .runner import check_diagnosis as check_diagnosis
    from .runner import diagnose as diagnose
    from .spec import DiagnosisFile as DiagnosisFile
    from .spec import load_diagnosis as load_diagnosis
    from .statistics.analysis import MarkerAnalysis as MarkerAnalysis
    from .statistics.analysis import MarkerStats as MarkerStats
    from .statistics.analysis import marker_analysis as marker_analysis
    from .statistics.blocks import diagnosis_blocks as diagnosis_blocks
    from .statistics.calibration import Calibration as Calibration
    from .statistics.calibration import calibrate as calibrate
    from .statistics.causal import CausalEvidence as CausalEvidence
    from .statistics.causal import causal_evidence as causal_evidence
    from .statistics.compare import PopulationComparison as PopulationComparison
    from .statistics.compare import compare_populations as compare_populations
    from .statistics.early import EarlyWarning as EarlyWarning
    from .statistics.early import early_warning as early_warning
    from .statistics.granulated import CMIResult as CMIResult
    from .statistics.granulated import GranulatedTau as GranulatedTau
    from .statistics.granulated import (
        conditional_mutual_information as conditional_mutual_information,
    )
    from .statistics.granulated import granulated_kendall_tau as granulated_kendall_tau
    from .statistics.levels import LevelMeanR2 as LevelMeanR2
    from .statistics.levels import level_mean_r2 as level_mean_r2
    from .statistics.survival import CensoredCrossing as CensoredCrossing
    from .statistics.survival import CensoringSensitivity as CensoringSensitivity
    from .statistics.survival import censor_crossing as censor_crossing
    from .statistics.survival import censoring_sensitivity as censoring_sensitivity
    from .statistics.table import MarkerTable as MarkerTable
    from .statistics.table import as_marker_table as as_marker_table
    from .table_diagnosis import diagnose_table as diagnose_table
    from .table_diagnosis import load_table_diagnosis as load_table_diagnosis
    from .table_io import read_marker_table as read_marker_table
