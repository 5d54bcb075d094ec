"""probekit: mechanistic interpretability of generalization in transformers."""

from .models import ModelConfig as ModelConfig
from .models import build_model as build_model
from .models import load_checkpoint as load_checkpoint
from .models import save_checkpoint as save_checkpoint

__version__ = "0.1.0"
