"""Relation-specific neurons (Liu et al. 2025): selection statistics and deactivation experiments."""

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
from .experiments import DeactivationConfig as DeactivationConfig
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
