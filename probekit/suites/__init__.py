"""Probe suites: TOML specs (``probes/*.toml``) and their runner.

Exports are lazy (:mod:`probekit.lazy`): validating a spec does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "SuiteResult": ".run",
    "build_examples": ".run",
    "run_suite": ".run",
    "Suite": ".spec",
    "SuiteError": ".spec",
    "load_suite": ".spec",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .run import SuiteResult as SuiteResult
    from .run import build_examples as build_examples
    from .run import run_suite as run_suite
    from .spec import Suite as Suite
    from .spec import SuiteError as SuiteError
    from .spec import load_suite as load_suite
