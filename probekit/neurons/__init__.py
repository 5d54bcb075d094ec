"""Relation-specific neurons (Liu et al. 2025): selection statistics and deactivation experiments.

Names are imported lazily (:mod:`probekit.lazy`): importing the config module (which the
suite and claim specs subclass) does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["FactSet", "deactivation_ops", "first_token_correct", "first_token_correct_sets", "generation_correct", "generation_correct_sets", "greedy_under", "greedy_under_sets"], ".deactivation"),
    **dict.fromkeys(["STORE_FORMAT", "RelationNeuronStudy", "relation_facts", "relation_neuron_study"], ".examples"),
    **dict.fromkeys(["DeactivationConfig"], ".config"),
    **dict.fromkeys(["RelationNeuronResult", "relation_neuron_experiments"], ".experiments"),
    **dict.fromkeys(["average_precision", "roc_auc"], ".ranking"),
    **dict.fromkeys(["NeuronSet", "jaccard_matrix", "random_like", "select_neurons"], ".selection"),
    **dict.fromkeys(["NeuronStatistics", "neuron_statistics", "statistics_from_responses"], ".statistics"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the eager imports
    from .config import DeactivationConfig as DeactivationConfig
    from .deactivation import FactSet as FactSet
    from .deactivation import deactivation_ops as deactivation_ops
    from .deactivation import first_token_correct as first_token_correct
    from .deactivation import first_token_correct_sets as first_token_correct_sets
    from .deactivation import generation_correct as generation_correct
    from .deactivation import generation_correct_sets as generation_correct_sets
    from .deactivation import greedy_under as greedy_under
    from .deactivation import greedy_under_sets as greedy_under_sets
    from .examples import STORE_FORMAT as STORE_FORMAT
    from .examples import RelationNeuronStudy as RelationNeuronStudy
    from .examples import relation_facts as relation_facts
    from .examples import relation_neuron_study as relation_neuron_study
    from .experiments import RelationNeuronResult as RelationNeuronResult
    from .experiments import relation_neuron_experiments as relation_neuron_experiments
    from .ranking import average_precision as average_precision
    from .ranking import roc_auc as roc_auc
    from .selection import NeuronSet as NeuronSet
    from .selection import jaccard_matrix as jaccard_matrix
    from .selection import random_like as random_like
    from .selection import select_neurons as select_neurons
    from .statistics import NeuronStatistics as NeuronStatistics
    from .statistics import neuron_statistics as neuron_statistics
    from .statistics import statistics_from_responses as statistics_from_responses
