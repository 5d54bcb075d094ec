"""Probe suites: TOML specs (``probes/*.toml``) and their runner."""

from .run import SuiteResult as SuiteResult
from .run import build_examples as build_examples
from .run import run_suite as run_suite
from .spec import Suite as Suite
from .spec import SuiteError as SuiteError
from .spec import load_suite as load_suite
