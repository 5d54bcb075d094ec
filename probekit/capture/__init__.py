"""Capture: typed sites, position rules, hook scopes, batched runs into memory or a store."""

from .batching import TokenBatch as TokenBatch
from .batching import pad_batch as pad_batch
from .collect import CaptureConfig as CaptureConfig
from .collect import CaptureResult as CaptureResult
from .collect import capture_to_store as capture_to_store
from .collect import collect_activations as collect_activations
from .collect import iter_capture as iter_capture
from .fingerprint import dataset_fingerprint as dataset_fingerprint
from .fingerprint import model_fingerprint as model_fingerprint
from .grad import record_with_grad as record_with_grad
from .hooks import capture as capture
from .hooks import count_hooks as count_hooks
from .positions import AllTokens as AllTokens
from .positions import LastToken as LastToken
from .positions import SpanMean as SpanMean
from .positions import TokenIndex as TokenIndex
from .positions import select_positions as select_positions
from .sites import SITE_KINDS as SITE_KINDS
from .sites import Site as Site
from .sites import all_layers as all_layers
