"""Run a batch with interventions: :func:`intervene` (a hook scope) and :func:`run_with_interventions`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..capture.batching import (
    PaddingSide,
    TokenBatch,
    model_device,
    pad_batch,
    pad_id_of,
    safe_padding_side,
)
from ..capture.collect import check_finite
from ..capture.hooks import hook_scope
from ..capture.layout import to_aligned, to_padded, to_probekit_layout
from ..capture.positions import select_positions
from ..capture.runner import run_batch, stop_layer, supports_kv_cache
from ..errors import ConfigError, DataError
from ..models.protocol import HookedModel
from ..sites import Site
from .apply import Keep, Records, aligned_view, site_hook
from .ops import Grad, Op, Read, Recompute

Objective = Callable[[Tensor, TokenBatch], Tensor]


@dataclass
class InterventionResult:
    """One intervened batch: aligned output, reads and gradients keyed by :class:`Site`.

    ``output`` is the logits ``(batch, pos, d_vocab)`` aligned (index ``t`` = unpadded token
    ``t``; entries past a row's length are 0), or the residual stream when the run stopped early.
    ``objective`` holds the per-row objective when one was given.
    """

    batch: TokenBatch
    output: Tensor | None
    reads: dict[Site, Tensor]
    grads: dict[Site, Tensor] = field(default_factory=dict)
    objective: Tensor | None = None
    _records: Records | None = field(default=None, repr=False)
    _ops: tuple[Op, ...] = field(default=(), repr=False)

    def __getitem__(self, site: Site | str) -> Tensor:
        """The read of ``site``."""
        key = site if isinstance(site, Site) else Site.parse(site)
        if key not in self.reads:
            raise KeyError(f"site {key} was not read; reads: {[s.short for s in self.reads]}")
        return self.reads[key]

    def backward(self, objective: Tensor) -> dict[Site, Tensor]:
        """Fill :attr:`grads`: d(sum of ``objective``)/d(activation) at every :class:`Grad` site.

        Uses ``torch.autograd.grad`` on the hooked activations (no parameter ``.grad`` is
        touched). Rows are independent, so row ``i`` of a gradient is the gradient of
        ``objective[i]``.
        """
        records = self._records
        grad_ops = [op for op in self._ops if isinstance(op, Grad)]
        if records is None or not grad_ops:
            raise ConfigError("no Grad ops in this run: add Grad(site=...) ops and run with grad=True")
        missing = [op.site.short for op in grad_ops if op.site not in records.grad_targets]
        if missing:
            raise ConfigError(f"Grad sites {missing} were not reached by the forward pass")
        tensors = list({id(t): t for t in records.grad_targets.values()}.values())
        total = objective.sum() if objective.ndim else objective
        grads = torch.autograd.grad(total, tensors, allow_unused=True)
        by_id = {id(t): g if g is not None else torch.zeros_like(t) for t, g in zip(tensors, grads)}
        for op in grad_ops:
            site = op.site
            g = to_probekit_layout(site.kind, by_id[id(records.grad_targets[site])])
            if site.head is not None:
                g = g[:, :, site.head]
            if op.positions is None:
                self.grads[site] = aligned_view(site, g, self.batch)
            else:
                if site.kind == "attn_pattern":
                    g = to_aligned(g, self.batch, axis=-1)
                self.grads[site] = select_positions(g, self.batch, op.positions).values
        return self.grads


def _hooks(ops: Sequence[Op], batch: TokenBatch, records: Records, grad: bool) -> list:
    by_site: dict[Site, list[Op | Keep]] = {}
    for op in ops:
        by_site.setdefault(op.site, []).append(op)
    for site in dict.fromkeys(s for op in ops if isinstance(op, Recompute) for s in op.inputs):
        by_site.setdefault(site, []).append(Keep(site))  # after the site's own ops
    for site, site_ops in by_site.items():
        if sum(isinstance(op, Read) for op in site_ops) > 1:
            raise ConfigError(f"site {site.short} is read twice; read each site once per run")
    if any(isinstance(op, Grad) for op in ops) and not grad:
        raise ConfigError("Grad ops need grad=True (gradients are off in this run)")
    return [(site, site_hook(site_ops, site, batch, records, grad)) for site, site_ops in by_site.items()]


@contextmanager
def intervene(
    model: HookedModel, batch: TokenBatch, ops: Sequence[Op], *, grad: bool = False
) -> Iterator[InterventionResult]:
    """Attach ``ops`` for forward passes of ``batch`` run inside the block; always clean up.

    The caller runs the model (``model(batch.input_ids, attention_mask=batch.attention_mask)``);
    reads land in the yielded result (``output`` stays ``None``). Hooks are removed (and gated
    bridge flags restored) on exit, also when the block raises.
    """
    records = Records()
    result = InterventionResult(batch, None, records.reads, _records=records, _ops=tuple(ops))
    with hook_scope(model, _hooks(ops, batch, records, grad)):
        yield result


def as_batch(
    model: HookedModel,
    tokens: TokenBatch | Tensor | Sequence[Sequence[int]],
    *,
    padding_side: PaddingSide = "right",
    pad_id: int | None = None,
) -> TokenBatch:
    """A :class:`TokenBatch` on ``model``'s device from token lists, a 2-D id tensor or a batch."""
    if isinstance(tokens, TokenBatch):
        return tokens.to(model_device(model))
    if isinstance(tokens, Tensor):
        if tokens.ndim != 2:
            raise DataError(
                f"token tensor must be (batch, pos), got shape {tuple(tokens.shape)}; "
                "use tokens[None] for one prompt"
            )
        tokens = tokens.tolist()
    if pad_id is None:
        pad_id = pad_id_of(model)
    side = safe_padding_side(model, padding_side)
    return pad_batch([list(map(int, seq)) for seq in tokens], pad_id=pad_id,
                     side=side).to(model_device(model))


def run_with_interventions(
    model: HookedModel,
    tokens: TokenBatch | Tensor | Sequence[Sequence[int]],
    ops: Sequence[Op] = (),
    *,
    padding_side: PaddingSide = "right",
    pad_id: int | None = None,
    grad: bool | None = None,
    objective: Objective | None = None,
    logits: str = "all",
    start: tuple[int, Tensor] | None = None,
    kv_cache: Any | None = None,
    kv_mask: Tensor | None = None,
) -> InterventionResult:
    """One forward pass of ``tokens`` with ``ops`` applied; reads, output and gradients.

    ``logits`` picks the output: ``"all"`` -> aligned logits ``(batch, pos, d_vocab)``;
    ``"last"`` -> ``(batch, d_vocab)`` at each row's last token only (the final norm and
    unembedding run on those tokens alone: much cheaper for large vocabularies); ``"none"`` ->
    stop after the last block an op touches (output: the aligned residual entering the next
    block, or the final residual). ``start=(k, resid)`` starts at block ``k`` from the aligned
    residual ``resid (batch, pos, d_model)`` entering it (e.g. a ``resid_pre@k`` Read of an
    earlier run), skipping blocks ``0..k-1``. ``kv_cache`` (Hugging Face models only,
    :func:`probekit.capture.runner.new_kv_cache`) is filled with every block's keys and values;
    given :func:`~probekit.capture.runner.kv_prefix` of an earlier run's cache (its first ``q``
    positions), ``tokens`` are each prompt's tokens after position ``q`` (right padding) and
    every position, op and output is in those suffix coordinates; ``kv_mask`` (``(batch, q)``
    0/1, :func:`~probekit.capture.runner.run_batch`) marks the cached pad positions, so rows may
    continue from prefixes of different lengths (e.g. right-padded prompts). ``objective(output, batch) -> (batch,)`` is
    differentiated into every :class:`Grad` site (``grad`` defaults to on iff there are Grad
    ops).

    Example:
        >>> clean = run_with_interventions(model, clean_toks, [Read(site=s)])
        >>> patched = run_with_interventions(model, corrupt_toks,
        ...                                  [Replace(site=s, values=clean[s], positions=LastToken())])
    """
    if logits not in ("all", "last", "none"):
        raise ConfigError(f"logits={logits!r} unknown; use 'all', 'last' or 'none'")
    if kv_cache is not None and not supports_kv_cache(model):
        raise ConfigError("kv_cache needs a Hugging Face model (past_key_values); this bridge is TL-native")
    if kv_cache is not None and kv_cache.get_seq_length() and padding_side != "right":
        raise ConfigError("a KV prefix needs right padding (pads after the suffix); use padding_side='right'")
    batch = as_batch(model, tokens, padding_side=padding_side, pad_id=pad_id)
    has_grad = any(isinstance(op, Grad) for op in ops)
    grad = has_grad if grad is None else grad
    if objective is not None and not has_grad:
        raise ConfigError("an objective is only used for Grad ops; add Grad(site=...) ops")
    if logits == "none" and objective is not None:
        raise ConfigError("logits='none' skips the logits the objective needs; use 'all' or 'last'")
    n_layers = int(model.cfg.n_layers)
    stop = {"all": None, "last": n_layers,
            "none": stop_layer(model, [op.site for op in ops]) if ops else 1}[logits]
    start_at, start_resid = (None, None)
    if start is not None:
        start_at, resid = start
        if not 0 <= start_at < n_layers or (stop is not None and stop <= start_at):
            raise ConfigError(f"start layer {start_at} must be in 0..{n_layers - 1} and before the stop")
        bad = [op.site.short for op in ops if op.site.layer is None or op.site.layer < start_at]
        if bad:
            raise ConfigError(f"ops at {bad} lie before start layer {start_at}; they would not run")
        width = batch.input_ids.shape[1]
        start_resid = to_padded(resid.to(model_device(model)), batch, width)
    records = Records()
    out = run_batch(model, batch, _hooks(ops, batch, records, grad), grad=grad, stop_at_layer=stop,
                    start_at_layer=start_at, start_resid=start_resid, kv_cache=kv_cache,
                    kv_mask=kv_mask)
    check_finite(records.reads, batch, model)
    if logits == "last":
        rows = torch.arange(out.shape[0], device=out.device)
        last = out[rows, batch.offsets.to(out.device) + batch.lengths.to(out.device) - 1]
        mode = torch.enable_grad() if grad else torch.inference_mode()
        with mode:
            output = model.unembed(model.ln_final(last[:, None]))[:, 0]
    else:
        output = to_aligned(out, batch)
    result = InterventionResult(batch, output, records.reads, _records=records, _ops=tuple(ops))
    if objective is not None:
        value = objective(output, batch)
        if value.ndim != 1 or value.shape[0] != batch.input_ids.shape[0]:
            raise DataError(
                f"objective returned shape {tuple(value.shape)}, expected one value per row "
                f"({batch.input_ids.shape[0]},); reduce over positions/vocab inside it"
            )
        result.backward(value)
        result.objective = value.detach()
        result.output = output.detach()
    return result
