"""Representational geometry: manifold capacity (MFTMA), dimension, factorization, dynamics.

Mean-field manifold capacity, radius and dimension (Chung, Lee & Sompolinsky 2018; the reference
code's steps, with every anchor QP solved in one batch), simulated capacity (ground truth), the
simple dimension / separation estimators of Chou et al. (2026), concept factorization (Uselis et
al. 2026) and training-dynamics markers (layer rotation, condition numbers).
"""

from .anchors import AnchorSolution as AnchorSolution
from .anchors import anchor_points as anchor_points
from .capacity import ManifoldCapacityResult as ManifoldCapacityResult
from .capacity import manifold_capacity as manifold_capacity
from .capacity import manifolds_from_labels as manifolds_from_labels
from .centers import CenterSubspace as CenterSubspace
from .centers import common_center_subspace as common_center_subspace
from .concept_means import ConceptMeansScores as ConceptMeansScores
from .concept_means import concept_means_scores as concept_means_scores
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
