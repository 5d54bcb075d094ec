"""Circuits: batched activation patching, attribution patching, logit lens, direct logit attribution.

Built only on :mod:`probekit.interventions` (no hooks of its own). Definitions:
``shared/methods/circuits.md``; reference: ``transformer_lens.patching``.
"""

from .metrics import answer_logprob as answer_logprob
from .metrics import last_token_logits as last_token_logits
from .metrics import logit_diff as logit_diff
from .patching import PatchingResult as PatchingResult
from .patching import activation_patching as activation_patching
