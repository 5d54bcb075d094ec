"""Linear probes (sklearn estimators), batched layer sweeps, control tasks, correctness probe.

Names are imported lazily (:mod:`probekit.lazy`): ``import probekit.probes.kind`` (the probe-kind
registry, which suite validation uses) does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["CheckpointSweepResult", "sweep_checkpoints"], ".checkpoints"),
    **dict.fromkeys(
        ["SelectivityResult", "control_labels", "selectivity", "selectivity_sweep"], ".control"
    ),
    **dict.fromkeys(
        ["BaselineComparison", "CorrectnessConfig", "CorrectnessProbeResult", "correctness_probe"],
        ".correctness",
    ),
    **dict.fromkeys(["DiffMeansProbe", "diffmeans_direction"], ".diffmeans"),
    **dict.fromkeys(
        ["GroupFit", "ProbeKind", "probe_kind", "register_probe_kind", "registered_probe_kinds"],
        ".kind",
    ),
    **dict.fromkeys(
        ["BatchedLogisticFit", "LogisticCVResult", "LogisticProbe", "cv_logistic_batched",
         "fit_logistic_batched"],
        ".logistic",
    ),
    **dict.fromkeys(["accuracy", "auroc", "r2_score", "within_group_auroc"], ".metrics"),
    "probe_permutation_test": ".permutation",
    **dict.fromkeys(["RidgeProbe", "fit_ridge_batched"], ".ridge"),
    **dict.fromkeys(["SweepConfig", "SweepResult", "sweep_layers"], ".sweep"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the eager imports
    from .checkpoints import CheckpointSweepResult as CheckpointSweepResult
    from .checkpoints import sweep_checkpoints as sweep_checkpoints
    from .control import SelectivityResult as SelectivityResult
    from .control import control_labels as control_labels
    from .control import selectivity as selectivity
    from .control import selectivity_sweep as selectivity_sweep
    from .correctness import BaselineComparison as BaselineComparison
    from .correctness import CorrectnessConfig as CorrectnessConfig
    from .correctness import CorrectnessProbeResult as CorrectnessProbeResult
    from .correctness import correctness_probe as correctness_probe
    from .diffmeans import DiffMeansProbe as DiffMeansProbe
    from .diffmeans import diffmeans_direction as diffmeans_direction
    from .kind import GroupFit as GroupFit
    from .kind import ProbeKind as ProbeKind
    from .kind import probe_kind as probe_kind
    from .kind import register_probe_kind as register_probe_kind
    from .kind import registered_probe_kinds as registered_probe_kinds
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
    from .sweep import SweepConfig as SweepConfig
    from .sweep import SweepResult as SweepResult
    from .sweep import sweep_layers as sweep_layers
