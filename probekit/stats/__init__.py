"""Hypothesis tests for probe results: permutation, bootstrap, correlation, paired, multiplicity.

Exports are lazy (PEP 562): importing one module (e.g. ``stats.result`` for
:class:`StatTestResult`) does not import scipy. This package imports nothing else of probekit.
"""

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "bootstrap_ci": "bootstrap",
    "bootstrap_indices": "bootstrap",
    "percentile_interval": "bootstrap",
    "loo_linear_error": "correlation",
    "pearson": "correlation",
    "spearman": "correlation",
    "spearman_ci": "correlation",
    "adjust_pvalues": "multiple",
    "benjamini_hochberg": "multiple",
    "holm": "multiple",
    "paired_ttest": "paired",
    "wilcoxon_signed_rank": "paired",
    "mc_se": "permutation",
    "n_permutations_for": "permutation",
    "permutation_pvalue": "permutation",
    "permutation_result": "permutation",
    "permutation_test": "permutation",
    "ConfidenceInterval": "result",
    "CorrelationResult": "result",
    "LeaveOneOutResult": "result",
    "MultipleTestResult": "result",
    "StatTestResult": "result",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name from its module on first access."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Public names, including the not yet imported ones."""
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from .bootstrap import bootstrap_ci as bootstrap_ci
    from .bootstrap import bootstrap_indices as bootstrap_indices
    from .bootstrap import percentile_interval as percentile_interval
    from .correlation import loo_linear_error as loo_linear_error
    from .correlation import pearson as pearson
    from .correlation import spearman as spearman
    from .correlation import spearman_ci as spearman_ci
    from .multiple import adjust_pvalues as adjust_pvalues
    from .multiple import benjamini_hochberg as benjamini_hochberg
    from .multiple import holm as holm
    from .paired import paired_ttest as paired_ttest
    from .paired import wilcoxon_signed_rank as wilcoxon_signed_rank
    from .permutation import mc_se as mc_se
    from .permutation import permutation_pvalue as permutation_pvalue
    from .permutation import permutation_result as permutation_result
    from .permutation import permutation_test as permutation_test
    from .result import ConfidenceInterval as ConfidenceInterval
    from .result import CorrelationResult as CorrelationResult
    from .result import LeaveOneOutResult as LeaveOneOutResult
    from .result import MultipleTestResult as MultipleTestResult
    from .result import StatTestResult as StatTestResult
