"""``modifier_he`` / ``sequence_he``: HE from a model + SCAN-style dataset, or from states + pairs.

An & Du (2026, arXiv 2601.18858): read the training inputs' token states (every block from one
capture), pool each pair's spans, and measure how well the three operator families compose the
parts into ``(h(a) + h(b)) / 2`` on held-out pairs. ``HEConfig(parts="separate")`` ([O]) reads
the parts from separate forward passes and the composite from its own
(:mod:`probekit.homomorphism.separate`), with one operator per modifier / connective.
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
from .separate import separate_pass_vectors
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
    pad_id: int | None = None,
) -> HEResult:
    cfg = config or HEConfig()
    from_model = model is not None or dataset is not None
    if from_model == (states is not None or pairs is not None):
        raise ConfigError(
            f"{kind}_he takes either (model, dataset) or (states=, pairs=), not both or neither"
        )
    if cfg.parts == "separate" and not from_model:
        raise ConfigError(
            f"{kind}_he(states=, pairs=) with HEConfig(parts='separate'): the separate passes "
            f"need the model; call {kind}_he(model, dataset, config=...)"
        )
    if from_model:
        if model is None or dataset is None:
            raise ConfigError(f"{kind}_he(model, dataset): both are needed")
        ds = _resolve_dataset(dataset, cfg)
        pairs = modifier_pairs(ds) if kind == "modifier" else sequence_pairs(ds)
        pad = int(getattr(getattr(dataset, "vocab", None), "pad_id", 0) if pad_id is None
                  else pad_id)
        states = capture_states(
            model, ds.tokens, site=cfg.site, batch_size=cfg.batch_size, pad_id=pad
        )
        if cfg.parts == "separate":
            a, b, target, layers = separate_pass_vectors(
                model, ds.tokens, pairs, site=cfg.site, pooling=cfg.pooling,
                batch_size=cfg.batch_size, pad_id=pad, states=states,
            )
            return composition_he(a, b, target, labels=pairs.label, layers=layers, kind=kind,
                                  config=cfg)
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
    pad_id: int | None = None,
) -> HEResult:
    """Modifier (unary) HE: primitive + adjacent modifier -> their span [C], every layer.

    Args:
        model: a probekit/TransformerLens model (captured through ``probekit.capture``).
        dataset: a :class:`TaskDataset` or a task (``config.split`` is read, [C]: ``train``).
        states: already captured :class:`TokenStates` (instead of model + dataset).
        pairs: :func:`modifier_pairs` of the dataset the states come from.
        config: :class:`HEConfig` (``parts="separate"``: states from separate passes, [O]).
        pad_id: padding token of the inputs (default: the task's ``vocab.pad_id``, else 0).
    """
    return _he("modifier", model, dataset, states, pairs, config, pad_id)


def sequence_he(
    model: HookedModel | None = None,
    dataset: Any = None,
    *,
    states: TokenStates | None = None,
    pairs: PairIndex | None = None,
    config: HEConfig | None = None,
    pad_id: int | None = None,
) -> HEResult:
    """Sequence (binary, ``then``) HE: consecutive parts -> their mean [C], every layer.

    Same arguments as :func:`modifier_he`, with :func:`sequence_pairs`.
    """
    return _he("sequence", model, dataset, states, pairs, config, pad_id)
