"""probekit: mechanistic interpretability of generalization in transformers.

capture -> store -> analysis -> stats -> report. See README.md for a quickstart.

Names are imported lazily (:mod:`probekit.lazy`): ``import probekit`` does not import torch.
"""

from typing import TYPE_CHECKING

from .lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    **dict.fromkeys(["capture", "models", "probes", "similarity", "stats", "store", "errors"], "."),
    **dict.fromkeys(
        ["AllTokens", "LastToken", "Site", "SpanMean", "TokenIndex", "capture_to_store",
         "collect_activations"],
        ".capture",
    ),
    **dict.fromkeys(
        ["HookedModel", "ModelConfig", "build_model", "list_models", "load_checkpoint", "load_model",
         "save_checkpoint"],
        ".models",
    ),
    **dict.fromkeys(
        ["DiffMeansProbe", "LogisticProbe", "RidgeProbe", "correctness_probe", "probe_permutation_test",
         "sweep_layers"],
        ".probes",
    ),
    "StatTestResult": ".stats",
    "ActivationStore": ".store",
    **dict.fromkeys(
        ["ProbekitError", "ConfigError", "DataError", "NonFiniteError", "StoreError",
         "ModelLoadError", "DeviceError"],
        ".errors",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the eager imports
    from . import capture as capture
    from . import models as models
    from . import probes as probes
    from . import similarity as similarity
    from . import stats as stats
    from . import store as store
    from .capture import AllTokens as AllTokens
    from .capture import LastToken as LastToken
    from .capture import Site as Site
    from .capture import SpanMean as SpanMean
    from .capture import TokenIndex as TokenIndex
    from .capture import capture_to_store as capture_to_store
    from .capture import collect_activations as collect_activations
    from .errors import ProbekitError as ProbekitError
    from .models import HookedModel as HookedModel
    from .models import ModelConfig as ModelConfig
    from .models import build_model as build_model
    from .models import list_models as list_models
    from .models import load_checkpoint as load_checkpoint
    from .models import load_model as load_model
    from .models import save_checkpoint as save_checkpoint
    from .probes import DiffMeansProbe as DiffMeansProbe
    from .probes import LogisticProbe as LogisticProbe
    from .probes import RidgeProbe as RidgeProbe
    from .probes import correctness_probe as correctness_probe
    from .probes import probe_permutation_test as probe_permutation_test
    from .probes import sweep_layers as sweep_layers
    from .stats import StatTestResult as StatTestResult
    from .store import ActivationStore as ActivationStore
