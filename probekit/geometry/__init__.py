"""Representational geometry: manifold capacity (MFTMA), dimension, factorization, dynamics."""

from .anchors import AnchorSolution as AnchorSolution
from .anchors import anchor_points as anchor_points
from .capacity import ManifoldCapacityResult as ManifoldCapacityResult
from .capacity import manifold_capacity as manifold_capacity
from .capacity import manifolds_from_labels as manifolds_from_labels
from .centers import CenterSubspace as CenterSubspace
from .centers import common_center_subspace as common_center_subspace
