"""Representational similarity: CKA, RSA, Procrustes and CCA, across layers, checkpoints, seeds.

Pure functions on ``(n, d)`` representations of the same ``n`` stimuli (rows aligned), plus
layer x layer studies that stream from an activation store. Definitions and papers:
``docs/similarity.md`` and ``docs/references.md``; each function's docstring states its formula.
"""

from .cka import MinibatchCKA as MinibatchCKA
from .cka import centre_gram as centre_gram
from .cka import cka as cka
from .cka import hsic as hsic
from .cka import linear_gram as linear_gram
from .cka import minibatch_cka as minibatch_cka
from .cka import rbf_gram as rbf_gram
from .layers import StreamedRep as StreamedRep
from .layers import checkpoint_drift as checkpoint_drift
from .layers import layer_similarity as layer_similarity
from .layers import seed_similarity as seed_similarity
from .layers import store_reps as store_reps
from .results import CheckpointDrift as CheckpointDrift
from .results import LayerSimilarity as LayerSimilarity
from .results import PopulationSimilarity as PopulationSimilarity
from .rsa import rdm as rdm
from .rsa import rsa as rsa
from .rsa import rsa_test as rsa_test
from .sections import CheckpointReps as CheckpointReps
from .sections import SimilaritySection as SimilaritySection
from .sections import similarity_section as similarity_section
from .shape import canonical_correlations as canonical_correlations
from .shape import cca_similarity as cca_similarity
from .shape import procrustes_distance as procrustes_distance
