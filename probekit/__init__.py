"""probekit: mechanistic interpretability of generalization in transformers.

capture -> store -> analysis -> stats -> report. See README.md for a quickstart.
"""

from . import capture as capture
from . import models as models
from . import store as store
from .capture import AllTokens as AllTokens
from .capture import LastToken as LastToken
from .capture import Site as Site
from .capture import SpanMean as SpanMean
from .capture import TokenIndex as TokenIndex
from .capture import capture_to_store as capture_to_store
from .capture import collect_activations as collect_activations
from .models import ModelConfig as ModelConfig
from .models import build_model as build_model
from .models import list_models as list_models
from .models import load_checkpoint as load_checkpoint
from .models import load_model as load_model
from .models import save_checkpoint as save_checkpoint
from .store import ActivationStore as ActivationStore

__version__ = "0.1.0"
