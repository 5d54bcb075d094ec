"""Representational geometry: manifold capacity (MFTMA), dimension, factorization, dynamics.

Mean-field manifold capacity, radius and dimension (Chung, Lee & Sompolinsky 2018; the reference
code's steps, with every anchor QP solved in one batch), simulated capacity (ground truth), the
simple dimension / separation estimators of Chou et al. (2026), concept factorization (Uselis et
al. 2026) and training-dynamics markers (layer rotation, condition numbers).

Names are imported lazily (:mod:`probekit.lazy`): importing the config module (which the
suite and claim specs subclass) does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["ManifoldConfig"], ".config"),
    **dict.fromkeys(["AnchorSolution", "anchor_points"], ".anchors"),
    **dict.fromkeys(["ManifoldCapacityResult", "manifold_capacity", "manifolds_from_labels"], ".capacity"),
    **dict.fromkeys(["CenterSubspace", "common_center_subspace"], ".centers"),
    **dict.fromkeys(["ConceptMeansScores", "concept_means_scores"], ".concept_means"),
    **dict.fromkeys(["GeometryCurves", "geometry_by_layer", "geometry_from_store"], ".curves"),
    **dict.fromkeys(["covariance_spectrum", "fisher_ratio", "n_components_for_variance", "nc1", "numerical_rank", "participation_ratio", "participation_ratio_per_class"], ".dimension"),
    **dict.fromkeys(["DynamicsMarkers", "activation_condition_number", "checkpoint_dynamics", "layer_rotation", "matrix_condition_number", "plot_dynamics", "weight_condition_numbers", "weight_rotation"], ".dynamics"),
    **dict.fromkeys(["FactorizationResult", "concept_factorization"], ".factorization"),
    **dict.fromkeys(["SiteFactorization", "SiteGeometry", "class_rows", "site_factorization", "site_geometry", "width_groups"], ".per_site"),
    **dict.fromkeys(["SimulatedCapacityResult", "simulated_capacity"], ".simulated"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the eager imports
    from .anchors import AnchorSolution as AnchorSolution
    from .anchors import anchor_points as anchor_points
    from .capacity import ManifoldCapacityResult as ManifoldCapacityResult
    from .capacity import manifold_capacity as manifold_capacity
    from .capacity import manifolds_from_labels as manifolds_from_labels
    from .centers import CenterSubspace as CenterSubspace
    from .centers import common_center_subspace as common_center_subspace
    from .concept_means import ConceptMeansScores as ConceptMeansScores
    from .concept_means import concept_means_scores as concept_means_scores
    from .config import ManifoldConfig as ManifoldConfig
    from .curves import GeometryCurves as GeometryCurves
    from .curves import geometry_by_layer as geometry_by_layer
    from .curves import geometry_from_store as geometry_from_store
    from .dimension import covariance_spectrum as covariance_spectrum
    from .dimension import fisher_ratio as fisher_ratio
    from .dimension import n_components_for_variance as n_components_for_variance
    from .dimension import nc1 as nc1
    from .dimension import numerical_rank as numerical_rank
    from .dimension import participation_ratio as participation_ratio
    from .dimension import participation_ratio_per_class as participation_ratio_per_class
    from .dynamics import DynamicsMarkers as DynamicsMarkers
    from .dynamics import activation_condition_number as activation_condition_number
    from .dynamics import checkpoint_dynamics as checkpoint_dynamics
    from .dynamics import layer_rotation as layer_rotation
    from .dynamics import matrix_condition_number as matrix_condition_number
    from .dynamics import plot_dynamics as plot_dynamics
    from .dynamics import weight_condition_numbers as weight_condition_numbers
    from .dynamics import weight_rotation as weight_rotation
    from .factorization import FactorizationResult as FactorizationResult
    from .factorization import concept_factorization as concept_factorization
    from .per_site import SiteFactorization as SiteFactorization
    from .per_site import SiteGeometry as SiteGeometry
    from .per_site import class_rows as class_rows
    from .per_site import site_factorization as site_factorization
    from .per_site import site_geometry as site_geometry
    from .per_site import width_groups as width_groups
    from .simulated import SimulatedCapacityResult as SimulatedCapacityResult
    from .simulated import simulated_capacity as simulated_capacity
