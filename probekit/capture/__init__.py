"""Capture: typed sites, position rules, hook scopes, batched runs into memory or a store.

``Site`` and the fingerprints live in the leaf modules :mod:`probekit.sites` and
:mod:`probekit.fingerprint` (so :mod:`probekit.store` need not import capture) and are re-exported
here.
"""

from ..fingerprint import dataset_fingerprint as dataset_fingerprint
from ..fingerprint import model_fingerprint as model_fingerprint
from ..sites import HEAD_KINDS as HEAD_KINDS
from ..sites import SITE_KINDS as SITE_KINDS
from ..sites import Site as Site
from ..sites import all_heads as all_heads
from ..sites import all_layers as all_layers
from ..sites import kv_head_of as kv_head_of
from .batching import TokenBatch as TokenBatch
from .batching import pad_batch as pad_batch
from .collect import CaptureConfig as CaptureConfig
from .collect import CaptureResult as CaptureResult
from .collect import capture_to_store as capture_to_store
from .collect import check_finite as check_finite
from .collect import collect_activations as collect_activations
from .collect import iter_capture as iter_capture
from .grad import record_with_grad as record_with_grad
from .hooks import capture as capture
from .hooks import count_hooks as count_hooks
from .hooks import hook_scope as hook_scope
from .layout import position_mask as position_mask
from .layout import to_aligned as to_aligned
from .layout import to_padded as to_padded
from .positions import AllTokens as AllTokens
from .positions import LastToken as LastToken
from .positions import SpanMean as SpanMean
from .positions import TokenIndex as TokenIndex
from .positions import select_positions as select_positions
from .runner import run_batch as run_batch
from .sharded import capture_sharded as capture_sharded
