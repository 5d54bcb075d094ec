"""Homomorphism error (An & Du 2026, arXiv 2601.18858): does composing part states commute?

Operators (affine, bilinear, MLP) are fit from pairs of part states to the composite's state;
their held-out error is the HE. ``modifier_he`` and ``sequence_he`` run it on a model and a
SCAN-style dataset (every layer from one capture); ``composition_he`` on any states.

Names are imported lazily (:mod:`probekit.lazy`): importing the config module (which the
suite and claim specs subclass) does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["modifier_he", "sequence_he"], ".api"),
    **dict.fromkeys(["HEConfig"], ".config"),
    **dict.fromkeys(["PARSE_COLUMNS", "measure_he", "parse_dataset"], ".examples"),
    **dict.fromkeys(["composite_target", "composition_he"], ".measure"),
    **dict.fromkeys(["AffineOperator", "BilinearOperator", "MLPOperator", "make_operator", "ridge_fit"], ".operators"),
    **dict.fromkeys(["PairIndex", "modifier_pairs", "sequence_pairs"], ".pairs"),
    **dict.fromkeys(["HEResult"], ".result"),
    **dict.fromkeys(["deleted_part_inputs", "separate_pass_vectors"], ".separate"),
    **dict.fromkeys(["split_pairs"], ".split"),
    **dict.fromkeys(["TokenStates", "capture_states", "pair_vectors"], ".states"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the eager imports
    from .api import modifier_he as modifier_he
    from .api import sequence_he as sequence_he
    from .config import HEConfig as HEConfig
    from .examples import PARSE_COLUMNS as PARSE_COLUMNS
    from .examples import measure_he as measure_he
    from .examples import parse_dataset as parse_dataset
    from .measure import composite_target as composite_target
    from .measure import composition_he as composition_he
    from .operators import AffineOperator as AffineOperator
    from .operators import BilinearOperator as BilinearOperator
    from .operators import MLPOperator as MLPOperator
    from .operators import make_operator as make_operator
    from .operators import ridge_fit as ridge_fit
    from .pairs import PairIndex as PairIndex
    from .pairs import modifier_pairs as modifier_pairs
    from .pairs import sequence_pairs as sequence_pairs
    from .result import HEResult as HEResult
    from .separate import deleted_part_inputs as deleted_part_inputs
    from .separate import separate_pass_vectors as separate_pass_vectors
    from .split import split_pairs as split_pairs
    from .states import TokenStates as TokenStates
    from .states import capture_states as capture_states
    from .states import pair_vectors as pair_vectors
