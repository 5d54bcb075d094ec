"""Suites: TOML specs (``probes/*.toml``), the analysis registry and the runner.

Exports are lazy (:mod:`probekit.lazy`): validating a spec does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "AnalysisContext": ".context",
    "Examples": ".data",
    "build_examples": ".data",
    "get_analysis": ".registry",
    "register_analysis": ".registry",
    "registered": ".registry",
    "AnalysisResult": ".result",
    "Hypothesis": ".result",
    "SuiteResult": ".run",
    "run_suite": ".run",
    "Suite": ".spec",
    "SuiteError": ".spec",
    "load_suite": ".spec",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .context import AnalysisContext as AnalysisContext
    from .data import Examples as Examples
    from .data import build_examples as build_examples
    from .registry import get_analysis as get_analysis
    from .registry import register_analysis as register_analysis
    from .registry import registered as registered
    from .result import AnalysisResult as AnalysisResult
    from .result import Hypothesis as Hypothesis
    from .run import SuiteResult as SuiteResult
    from .run import run_suite as run_suite
    from .spec import Suite as Suite
    from .spec import SuiteError as SuiteError
    from .spec import load_suite as load_suite
