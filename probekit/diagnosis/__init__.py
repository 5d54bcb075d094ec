"""Generalization diagnosis: which internal markers predict OOD success, beyond the design.

Statistics on a marker table (one row per model; guide: ``docs/diagnosis.md``):
:func:`marker_analysis` (marginal, partial and leave-one-group-out association per marker, with
verdicts), :func:`granulated_kendall_tau` and :func:`conditional_mutual_information` (Jiang et
al. 2020), :func:`level_mean_r2` (An & Du's level-mean unit), :func:`early_warning` (markers at
each series step) and :func:`diagnosis_blocks` (report blocks), all pure numpy / scipy; and the
engine above suites and hypotheses: :func:`load_diagnosis` (a diagnosis file: ``[population]``,
``[[marker]]``, ``[diagnosis]``), :func:`diagnose` (train or find the population, measure every
marker per checkpoint through the executor, analyse, write ``markers.csv`` and the report) and
:func:`check_diagnosis`; :func:`read_marker_table` and :func:`diagnose_table` analyse an existing
table (``[population] table = FILE`` or ``probekit diagnose --table``). Exports are lazy
(:mod:`probekit.lazy`).
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "MarkerAnalysis": ".analysis",
    "MarkerStats": ".analysis",
    "marker_analysis": ".analysis",
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
    "EarlyWarning": ".early",
    "early_warning": ".early",
    "diagnosis_blocks": ".blocks",
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
    from .censoring import CensoredCrossing as CensoredCrossing
    from .censoring import censor_crossing as censor_crossing
    from .early import EarlyWarning as EarlyWarning
    from .early import early_warning as early_warning
    from .granulated import CMIResult as CMIResult
    from .granulated import GranulatedTau as GranulatedTau
    from .granulated import conditional_mutual_information as conditional_mutual_information
    from .granulated import granulated_kendall_tau as granulated_kendall_tau
    from .levels import LevelMeanR2 as LevelMeanR2
    from .levels import level_mean_r2 as level_mean_r2
    from .runner import DiagnosisResult as DiagnosisResult
    from .runner import check_diagnosis as check_diagnosis
    from .runner import diagnose as diagnose
    from .spec import DiagnosisFile as DiagnosisFile
    from .spec import load_diagnosis as load_diagnosis
    from .table import MarkerTable as MarkerTable
    from .table import as_marker_table as as_marker_table
    from .table_diagnosis import diagnose_table as diagnose_table
    from .table_diagnosis import load_table_diagnosis as load_table_diagnosis
    from .table_io import read_marker_table as read_marker_table
