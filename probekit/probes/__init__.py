"""Linear probes (sklearn estimators), batched layer sweeps, control tasks, correctness probe."""

from .checkpoints import CheckpointSweepResult as CheckpointSweepResult
from .checkpoints import sweep_checkpoints as sweep_checkpoints
from .control import SelectivityResult as SelectivityResult
from .control import control_labels as control_labels
from .control import selectivity as selectivity
from .control import selectivity_sweep as selectivity_sweep
from .correctness import BaselineComparison as BaselineComparison
from .correctness import CorrectnessProbeResult as CorrectnessProbeResult
from .correctness import correctness_probe as correctness_probe
from .diffmeans import DiffMeansProbe as DiffMeansProbe
from .diffmeans import diffmeans_direction as diffmeans_direction
from .logistic import BatchedLogisticFit as BatchedLogisticFit
from .logistic import LogisticCVResult as LogisticCVResult
from .logistic import LogisticProbe as LogisticProbe
from .logistic import cv_logistic_batched as cv_logistic_batched
from .logistic import fit_logistic_batched as fit_logistic_batched
from .metrics import accuracy as accuracy
from .metrics import auroc as auroc
from .metrics import r2_score as r2_score
from .metrics import within_group_auroc as within_group_auroc
from .permutation import probe_permutation_test as probe_permutation_test
from .ridge import RidgeProbe as RidgeProbe
from .ridge import fit_ridge_batched as fit_ridge_batched
from .sweep import SweepResult as SweepResult
from .sweep import sweep_layers as sweep_layers
