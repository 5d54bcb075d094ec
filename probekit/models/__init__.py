"""Models: build from config, checkpoints, local Hugging Face directories, named offline LMs."""

from .checkpoint import load_checkpoint as load_checkpoint
from .checkpoint import save_checkpoint as save_checkpoint
from .config import ModelConfig as ModelConfig
from .loading import list_models as list_models
from .loading import load_model as load_model
from .native import build_model as build_model
from .protocol import HookedModel as HookedModel
