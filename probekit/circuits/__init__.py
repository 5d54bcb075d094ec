"""Circuits: batched activation patching, attribution patching, edge attribution (EAP, EAP-IG), logit lens, DLA.

Generic: any model, any task. Built only on :mod:`probekit.interventions` (no hooks of its own);
names no testbed (contract ``circuits-generic``): analyses of one testbed live in their own
packages above it (:mod:`probekit.grokking`, :mod:`probekit.kg`). Guide and papers:
``docs/circuits.md``; reference implementation: ``transformer_lens.patching``.
"""

from ..capture.answers import AnswerTokens as AnswerTokens
from ..capture.answers import answer_ids as answer_ids
from ..capture.answers import answer_token as answer_token
from ..capture.answers import answer_token_ids as answer_token_ids
from ..capture.answers import reduction_warning as reduction_warning
from .attribution import attribution_patching as attribution_patching
from .attribution import patching_correlation as patching_correlation
from .eap import EdgeGraph as EdgeGraph
from .eap import EdgeScores as EdgeScores
from .eap import FaithfulnessCurve as FaithfulnessCurve
from .eap import edge_attribution as edge_attribution
from .eap import edge_graph as edge_graph
from .eap import edge_patched_metric as edge_patched_metric
from .eap import faithfulness_curve as faithfulness_curve
from .eap import top_k_edges as top_k_edges
from .lens import DirectLogitAttribution as DirectLogitAttribution
from .lens import LogitLensResult as LogitLensResult
from .lens import direct_logit_attribution as direct_logit_attribution
from .lens import logit_lens as logit_lens
from .lens import weight_processing as weight_processing
from .metrics import answer_logprob as answer_logprob
from .metrics import last_token_logits as last_token_logits
from .metrics import logit_diff as logit_diff
from .patch_grid import PatchOptions as PatchOptions
from .patching import PatchingResult as PatchingResult
from .patching import activation_patching as activation_patching
from .patching_report import PatchingGrids as PatchingGrids
from .patching_report import patching_grids as patching_grids
from .prompt_pairs import patch_pairs as patch_pairs
from .sweep import patching_sweep as patching_sweep
from .tracing import causal_tracing as causal_tracing
