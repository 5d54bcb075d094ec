"""``modifier_he`` / ``sequence_he``: HE from a model + SCAN-style dataset, or from states + pairs.

An & Du (2026, arXiv 2601.18858): read the training inputs' token states (every block from one
capture), pool each pair's spans, and measure how well the three operator families compose the
parts into ``(h(a) + h(b)) / 2`` on held-out pairs.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, DataError
from ..models.protocol import HookedModel
from ..testbeds.base import TaskDataset
from .config import HEConfig
from .measure import composition_he
from .pairs import PairIndex, modifier_pairs, sequence_pairs
from .result import HEResult
from .states import TokenStates, capture_states, pair_vectors


def _resolve_dataset(dataset: Any, cfg: HEConfig) -> TaskDataset:
    if isinstance(dataset, TaskDataset):
        ds = dataset
    elif hasattr(dataset, "splits"):
        splits = dataset.splits()
        if cfg.split not in splits:
            raise ConfigError(
                f"HEConfig.split={cfg.split!r} not in the task's splits {list(splits)}"
            )
        ds = splits[cfg.split]
    else:
        raise ConfigError(
            f"dataset must be a TaskDataset or a task with splits(), got {type(dataset).__name__}"
        )
    if cfg.max_examples is not None and len(ds) > cfg.max_examples:
        ds = ds.subset(range(cfg.max_examples))
    return ds


def _he(
    kind: str,
    model: HookedModel | None,
    dataset: Any,
    states: TokenStates | None,
    pairs: PairIndex | None,
    config: HEConfig | None,
) -> HEResult:
    cfg = config or HEConfig()
    from_model = model is not None or dataset is not None
    if from_model == (states is not None or pairs is not None):
        raise ConfigError(
            f"{kind}_he takes either (model, dataset) or (states=, pairs=), not both or neither"
        )
    if from_model:
        if model is None or dataset is None:
            raise ConfigError(f"{kind}_he(model, dataset): both are needed")
        ds = _resolve_dataset(dataset, cfg)
        pairs = modifier_pairs(ds) if kind == "modifier" else sequence_pairs(ds)
        pad = getattr(getattr(dataset, "vocab", None), "pad_id", 0)
        states = capture_states(
            model, ds.tokens, site=cfg.site, batch_size=cfg.batch_size, pad_id=int(pad)
        )
    if states is None or pairs is None:
        raise ConfigError(f"{kind}_he(states=, pairs=): both are needed")
    if pairs.kind != kind:
        raise DataError(f"{kind}_he got {pairs.kind} pairs; mine them with {kind}_pairs(dataset)")
    a, b = pair_vectors(states, pairs, pooling=cfg.pooling)
    return composition_he(a, b, labels=pairs.label, layers=states.layers, kind=kind, config=cfg)


def modifier_he(
    model: HookedModel | None = None,
    dataset: Any = None,
    *,
    states: TokenStates | None = None,
    pairs: PairIndex | None = None,
    config: HEConfig | None = None,
) -> HEResult:
    """Modifier (unary) HE: primitive + adjacent modifier -> their span [C], every layer.

    Args:
        model: a probekit/TransformerLens model (captured through ``probekit.capture``).
        dataset: a :class:`TaskDataset` or a task (``config.split`` is read, [C]: ``train``).
        states: already captured :class:`TokenStates` (instead of model + dataset).
        pairs: :func:`modifier_pairs` of the dataset the states come from.
        config: :class:`HEConfig`.
    """
    return _he("modifier", model, dataset, states, pairs, config)


def sequence_he(
    model: HookedModel | None = None,
    dataset: Any = None,
    *,
    states: TokenStates | None = None,
    pairs: PairIndex | None = None,
    config: HEConfig | None = None,
) -> HEResult:
    """Sequence (binary, ``then``) HE: consecutive parts -> their mean [C], every layer.

    Same arguments as :func:`modifier_he`, with :func:`sequence_pairs`.
    """
    return _he("sequence", model, dataset, states, pairs, config)
