"""Grokking of modular addition: Fourier features and progress measures (Nanda et al. 2023).

Analyses specific to the ``modular_addition`` testbed: the Fourier basis of the residues and the
power per frequency (:mod:`.fourier`), the key-frequency share of the logits or the embedding with
bootstrap resamples (:mod:`.fourier_share`), the progress measures over training checkpoints
(restricted / excluded loss, Fourier Gini, weight norm: :mod:`.progress_measures`) and their
statistics (:mod:`.progress_stats`), and the checkpoints' task and train mask
(:mod:`.modadd_checkpoints`). A testbed row of ``docs/architecture.md``: it may use the method
packages; the generic :mod:`probekit.circuits` never imports it. Guide: ``docs/circuits.md``.
"""

from .fourier import fourier_basis as fourier_basis
from .fourier import frequency_power as frequency_power
from .fourier import key_frequencies as key_frequencies
from .fourier import key_frequency_share as key_frequency_share
from .progress_measures import ProgressSeries as ProgressSeries
from .progress_measures import excluded_logits as excluded_logits
from .progress_measures import gini as gini
from .progress_measures import neuron_excluded_logits as neuron_excluded_logits
from .progress_measures import neuron_path as neuron_path
from .progress_measures import neuron_restricted_logits as neuron_restricted_logits
from .progress_measures import progress_measures as progress_measures
from .progress_measures import restricted_logits as restricted_logits
