"""Numerical optimisers shared by the method modules (batched L-BFGS)."""

from .lbfgs import LBFGSResult as LBFGSResult
from .lbfgs import lbfgs_batched as lbfgs_batched
