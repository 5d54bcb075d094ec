"""The one batch runner: a forward pass over a :class:`TokenBatch` with hooks attached.

Capture and interventions both run batches through :func:`run_batch`: hooks are attached for the
one forward (through :func:`~probekit.capture.hooks.hook_scope`, so they are always removed),
gradients are on or off (``grad``; off runs under ``torch.inference_mode``), and the forward runs
to the logits or stops after block ``stop_at_layer - 1`` (:func:`stop_layer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..sites import Site
from .batching import TokenBatch
from .hooks import HookFn, hook_scope


def stop_layer(model: HookedModel, sites: Iterable[Site]) -> int | None:
    """Blocks after the last one ``sites`` touch need not run (``None``: the whole model must).

    ``ln_final``/``ln_final_scale`` need every block; a model-level site before the blocks
    (``embed``, ``pos_embed``) needs none but block 0 is run so the forward stays well-formed.
    """
    sites = list(sites)
    if any(s.layer is None and s.kind.startswith("ln_final") for s in sites):
        return None
    layers = [s.layer for s in sites if s.layer is not None]
    return (max(layers) + 1) if layers else 1


class _FinalResidual(Exception):  # noqa: N818 (control flow, like TL's StopAtLayerException)
    """Raised by the stop hook after the last block; carries the residual stream."""

    def __init__(self, resid: Tensor) -> None:
        """Keep ``resid``."""
        super().__init__("final residual")
        self.resid = resid


def _raise_final(activation: Tensor) -> None:
    raise _FinalResidual(activation)


#: Whether a block class returns a tuple (HF 4.x / TL-native blocks) or a bare tensor (HF 5.x
#: decoder layers); learnt from the first real call of each class, see :func:`skip_blocks`.
_RETURNS_TUPLE: dict[type, bool] = {}


def _passthrough(block: Any) -> Any:
    """A ``forward`` for ``block`` that returns its input hidden states in the block's convention."""
    cls = type(block.original_component)

    def forward(*args: Any, **kwargs: Any) -> Any:
        hidden = args[0] if args else kwargs["hidden_states"]
        if cls not in _RETURNS_TUPLE:  # learn the return convention once, from a real call
            out = type(block).forward(block, *args, **kwargs)
            _RETURNS_TUPLE[cls] = isinstance(out, tuple)
            return out
        return (hidden,) if _RETURNS_TUPLE[cls] else hidden

    return forward


@contextmanager
def skip_blocks(model: HookedModel, start: int) -> Iterator[None]:
    """Blocks ``0..start-1`` pass their input through unchanged for the ``with`` block.

    The bridge's ``start_at_layer`` swaps the caller's residual in at block ``start`` but still
    runs (and discards) the blocks before it; with this scope they cost nothing, so a run from
    block ``k`` costs ``n_layers - k`` blocks. Their hook points see the pass-through values, so
    no op may sit before ``start`` (run_with_interventions refuses them). Restored on exit.
    """
    blocks = list(getattr(model, "blocks", []))[:start]
    try:
        for block in blocks:  # the instance dict: bridge components forward setattr to HF
            block.__dict__["forward"] = _passthrough(block)
        yield
    finally:
        for block in blocks:
            block.__dict__.pop("forward", None)


def supports_kv_cache(model: HookedModel) -> bool:
    """Whether ``model`` runs a Hugging Face model that takes a KV cache (``past_key_values``).

    TL-native bridges (the testbed models) do not.
    """
    underlying = getattr(getattr(model, "_driver", None), "underlying_model", None)
    return callable(getattr(underlying, "prepare_inputs_for_generation", None))


def supports_kv_mask(model: HookedModel) -> bool:
    """Whether ``model`` takes a KV cache and derives each row's token positions from the mask.

    A ``kv_mask`` with pads inside the cached prefix (rows of different lengths) needs positions
    counted over real tokens only; the transformer-lens 4.3 bridge derives them from the 2-D
    attention mask where the wrapped model accepts ``position_ids`` (its
    ``_accepts_derived_position_ids``). Elsewhere :func:`run_batch` refuses a ``kv_mask``.
    """
    derives = getattr(model, "_accepts_derived_position_ids", None)
    return supports_kv_cache(model) and callable(derives) and bool(derives())


def new_kv_cache() -> Any:
    """An empty Hugging Face ``DynamicCache``: a run given it fills it with every block's keys/values."""
    from transformers import DynamicCache

    return DynamicCache()


def kv_cache_filled(cache: Any, length: int) -> bool:
    """Whether a run over ``length`` positions left ``length`` positions in ``cache``.

    transformer-lens 4.3 bridges on transformers >= 5.24 return a cache whose layers stay empty
    (pyproject pins ``transformers<5.24``); callers fall back to full re-runs rather than
    continue from an empty cache.
    """
    get_length = getattr(cache, "get_seq_length", None)
    return callable(get_length) and int(get_length()) == length


def kv_prefix(cache: Any, rows: Tensor, length: int) -> Any:
    """A new cache holding rows ``rows`` and the first ``length`` positions of ``cache``.

    A run given it processes the tokens *after* those ``length`` positions: their keys and
    values come from the cache (positions and rotary phases continue from ``length``).
    """
    from transformers import DynamicCache

    out = DynamicCache()
    for i, layer in enumerate(cache.layers):
        idx = rows.to(layer.keys.device)
        out.update(layer.keys[idx, :, :length], layer.values[idx, :, :length], i)
    return out


def run_batch(
    model: HookedModel,
    batch: TokenBatch,
    hooks: Sequence[tuple[Site, HookFn]] = (),
    *,
    grad: bool = False,
    stop_at_layer: int | None = None,
    start_at_layer: int | None = None,
    start_resid: Tensor | None = None,
    kv_cache: Any | None = None,
    kv_mask: Tensor | None = None,
) -> Tensor:
    """Run ``model`` on ``batch`` with ``hooks``; return its output.

    The output is the logits ``(batch, pos, d_vocab)`` in *padded* layout, or with
    ``stop_at_layer`` the residual stream entering that block (``stop_at_layer = n_layers``:
    the residual after the last block, before the final norm and unembedding, which are then
    skipped). ``start_at_layer`` with ``start_resid`` (padded ``(batch, pos, d_model)``, the
    residual entering that block) skips the blocks before it (:func:`skip_blocks`: they do not
    run). ``kv_cache`` (a Hugging Face cache, :func:`new_kv_cache` / :func:`kv_prefix`) is
    filled by the run; when it already holds ``q`` positions, ``batch`` holds the tokens after
    them (right-padded). ``kv_mask`` (``(batch, q)`` 0/1) marks which of the ``q`` cached
    positions are real tokens of each row: the attention mask ``[kv_mask, batch mask]`` is then
    always passed, so cached pad positions are not attended and the bridge derives each row's
    token positions from the mask (rows whose cached prefixes have different lengths). The
    attention mask is passed whenever the batch is padded. ``grad=False`` runs under ``torch.inference_mode`` (outputs
    cannot enter autograd later); ``grad=True`` keeps the graph for a backward pass.
    """
    kwargs: dict[str, Any] = {}
    past = 0 if kv_cache is None else int(kv_cache.get_seq_length())
    if kv_mask is not None:
        if kv_cache is None or tuple(kv_mask.shape) != (batch.input_ids.shape[0], past):
            raise ConfigError(
                f"kv_mask has shape {tuple(kv_mask.shape)}; expected (batch, cached positions) = "
                f"({batch.input_ids.shape[0]}, {past}) with a kv_cache holding them"
            )
        if not supports_kv_mask(model):
            raise ConfigError("kv_mask needs a bridge that derives token positions from the attention "
                              "mask (supports_kv_mask); run the whole sequences instead")
        mask = batch.attention_mask
        kwargs["attention_mask"] = torch.cat([kv_mask.to(mask.device, mask.dtype), mask], 1)
    elif batch.is_padded:
        mask = batch.attention_mask
        if past:
            mask = torch.cat([torch.ones(mask.shape[0], past, dtype=mask.dtype, device=mask.device), mask], 1)
        kwargs["attention_mask"] = mask
    if kv_cache is not None:
        kwargs.update(past_key_values=kv_cache, use_cache=True)
    n_layers = int(model.cfg.n_layers)
    final = stop_at_layer is not None and stop_at_layer >= n_layers
    if stop_at_layer is not None and not final:
        kwargs["stop_at_layer"] = stop_at_layer
    if final:  # TL runs the unembedding for stop_at_layer >= n_layers: stop after the last block
        hooks = [*hooks, (Site(n_layers - 1, "resid_post"), _raise_final)]
    inputs = batch.input_ids
    if start_at_layer is not None:
        if start_resid is None:
            raise ConfigError("start_at_layer needs start_resid, the residual entering that block")
        kwargs["start_at_layer"] = start_at_layer
        inputs = start_resid
    mode = torch.enable_grad() if grad else torch.inference_mode()
    with hook_scope(model, hooks), skip_blocks(model, start_at_layer or 0), mode:
        try:
            return model(inputs, **kwargs)
        except _FinalResidual as stop:
            return stop.resid
