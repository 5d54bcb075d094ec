"""Hypothesis tests for probe results: permutation, bootstrap, correlation, paired, multiplicity."""

from .bootstrap import bootstrap_ci as bootstrap_ci
from .bootstrap import bootstrap_indices as bootstrap_indices
from .bootstrap import percentile_interval as percentile_interval
from .correlation import loo_linear_error as loo_linear_error
from .correlation import pearson as pearson
from .correlation import spearman as spearman
from .multiple import adjust_pvalues as adjust_pvalues
from .multiple import benjamini_hochberg as benjamini_hochberg
from .multiple import holm as holm
from .paired import paired_ttest as paired_ttest
from .paired import wilcoxon_signed_rank as wilcoxon_signed_rank
from .permutation import permutation_pvalue as permutation_pvalue
from .permutation import permutation_result as permutation_result
from .permutation import permutation_test as permutation_test
from .result import ConfidenceInterval as ConfidenceInterval
from .result import CorrelationResult as CorrelationResult
from .result import LeaveOneOutResult as LeaveOneOutResult
from .result import MultipleTestResult as MultipleTestResult
from .result import StatTestResult as StatTestResult
