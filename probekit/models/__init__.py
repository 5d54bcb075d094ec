"""Models: build from config, checkpoints, local Hugging Face directories, named offline LMs.

Exports are lazy (:mod:`probekit.lazy`): ``list_models`` answers without importing torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "load_checkpoint": ".checkpoint",
    "save_checkpoint": ".checkpoint",
    "ModelConfig": ".config",
    "list_models": ".named",
    "load_model": ".loading",
    "load_model_cached": ".cached",
    "build_model": ".native",
    "HookedModel": ".protocol",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .cached import load_model_cached as load_model_cached
    from .checkpoint import load_checkpoint as load_checkpoint
    from .checkpoint import save_checkpoint as save_checkpoint
    from .config import ModelConfig as ModelConfig
    from .loading import load_model as load_model
    from .named import list_models as list_models
    from .native import build_model as build_model
    from .protocol import HookedModel as HookedModel
