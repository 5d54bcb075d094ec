"""Logit lens (nostalgebraist 2020) and direct logit attribution (Elhage et al. 2021).

Logit lens: the final norm and unembedding applied to the residual stream after each block, at
every position: the probability and rank of target tokens per (layer, position).

Direct logit attribution (DLA): with the final norm's scale frozen at its value in the run, the
final residual at the last token is a sum of component outputs (embeddings, each head's
``z_h W_O^h``, attention output biases, each MLP), so the logit difference ``(W_U[:, a] -
W_U[:, f]) . LN(x)`` splits into per-component terms plus a constant (norm and unembedding
biases). The terms sum exactly to the model's logit difference. Weight processing changes these
numbers (centred unembedding, folded norms): results record the model's compatibility mode.

Reads go through :mod:`probekit.interventions`; the norm and unembedding are the model's own
modules (``model.ln_final``, ``model.unembed``) and weights (``W_U``, ``W_O``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..capture.batching import PaddingSide
from ..capture.positions import LastToken
from ..errors import DataError
from ..interventions import Read, run_with_interventions
from ..models.protocol import HookedModel
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..sites import Site
from .patch_grid import as_token_lists, check_token_limits


def weight_processing(model: HookedModel) -> dict[str, object]:
    """What weight processing was on (logit lens and DLA values depend on it)."""
    cfg = model.cfg
    return {
        "compatibility_mode": bool(getattr(model, "compatibility_mode", False)),
        **{k: getattr(cfg, k, None) for k in ("fold_ln", "center_writing_weights", "center_unembed",
                                              "fold_value_biases", "normalization_type")},
    }


@dataclass(frozen=True, repr=False)
class LogitLensResult(NotebookMixin):
    """Per prompt, layer (block output) and position: target probability and rank (0 = top).

    ``top`` is the top-1 token id. Positions past a prompt's length hold NaN / -1.
    """

    prob: Float[Tensor, "prompt layer pos target"]
    rank: Int[Tensor, "prompt layer pos target"]
    top: Int[Tensor, "prompt layer pos"]
    layers: list[int]
    processing: dict[str, object]

    def to_records(self) -> list[dict[str, Any]]:
        """Per layer and target at each prompt's last token (:func:`.blocks.logit_lens_records`)."""
        from .blocks import logit_lens_records

        return logit_lens_records(self)

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import logit_lens_blocks

        return tuple(logit_lens_blocks(self))

    def _summary(self) -> str:
        recs = [r for r in self.to_records() if r["target"] == 0]
        first = next((r["layer"] for r in recs if r["top1"] >= 0.5), None)
        return (f"{self.prob.shape[0]} prompts, {len(self.layers)} layers; P(target) at the last "
                f"layer {recs[-1]['mean_prob']:.3f}, top-1 for most prompts from layer {first}")


def _targets(targets: Tensor | Sequence[int] | Sequence[Sequence[int]], n: int, d_vocab: int,
             what: str = "targets") -> Tensor:
    raw = torch.as_tensor(targets)
    if raw.is_floating_point() and not bool((raw == raw.round()).all()):
        raise DataError(f"{what} holds non-integer values; give token ids (integers)")
    t = raw.long()
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2 or t.shape[0] != n:
        raise DataError(
            f"{what} has shape {tuple(t.shape)} but there are {n} prompts; give one token id "
            "(or a list of ids) per prompt"
        )
    bad = t[(t < 0) | (t >= d_vocab)]
    if bad.numel():
        raise DataError(f"{what} holds token id {int(bad[0])}, outside the model's vocabulary "
                        f"(0..{d_vocab - 1})")
    return t


def _unembed_normed(model: HookedModel, resid: Tensor) -> Tensor:
    return model.unembed(model.ln_final(resid))


def logit_lens(
    model: HookedModel,
    tokens: Tensor | Sequence[Sequence[int]],
    targets: Tensor | Sequence[int] | Sequence[Sequence[int]],
    *,
    layers: Sequence[int] | None = None,
    padding_side: PaddingSide = "right",
) -> LogitLensResult:
    """Probability and rank of ``targets`` decoded from each block's output at every position.

    ``targets`` is one token id per prompt or ``(prompt, k)`` ids. The last layer's decoding is
    the model's own output distribution.
    """
    toks = as_token_lists(tokens, "tokens")
    check_token_limits(model, toks, "tokens")
    tgt = _targets(targets, len(toks), int(model.cfg.d_vocab))
    layer_list = list(range(model.cfg.n_layers)) if layers is None else list(layers)
    sites = [Site(layer, "resid_post") for layer in layer_list]
    run = run_with_interventions(model, toks, [Read(site=s) for s in sites], padding_side=padding_side,
                                 logits="none")
    lengths = run.batch.lengths.cpu()
    n, n_pos = len(toks), int(lengths.max())
    prob = torch.full((n, len(sites), n_pos, tgt.shape[1]), float("nan"))
    rank = torch.full((n, len(sites), n_pos, tgt.shape[1]), -1, dtype=torch.long)
    top = torch.full((n, len(sites), n_pos), -1, dtype=torch.long)
    real = torch.arange(n_pos)[None, :] < lengths[:, None]
    with torch.inference_mode():
        for i, s in enumerate(sites):
            logits = _unembed_normed(model, run.reads[s]).float().cpu()  # (prompt, pos, vocab)
            logp = torch.log_softmax(logits, -1)
            t = tgt[:, None, :].expand(n, n_pos, tgt.shape[1])
            tl = logits.gather(-1, t)
            p = logp.gather(-1, t).exp()
            r = (logits[..., None, :] > tl[..., None]).sum(-1)
            prob[:, i] = torch.where(real[..., None], p, prob[:, i])
            rank[:, i] = torch.where(real[..., None], r, rank[:, i])
            top[:, i] = torch.where(real, logits.argmax(-1), top[:, i])
    return LogitLensResult(prob=prob, rank=rank, top=top, layers=layer_list,
                           processing=weight_processing(model))


@dataclass(frozen=True, repr=False)
class DirectLogitAttribution(NotebookMixin):
    """Per-component contributions to the logit difference at each prompt's last token.

    ``heads`` is ``(prompt, layer, head)``, ``mlps`` ``(prompt, layer)``, ``attn_bias``
    ``(prompt, layer)``, ``embed`` ``(prompt,)`` (token + positional embeddings), ``constant``
    the norm/unembedding bias term; their sum equals ``total``, the model's own logit difference
    (tested), because the final residual is exactly the sum of these outputs.
    """

    heads: Float[Tensor, "prompt layer head"]
    mlps: Float[Tensor, "prompt layer"]
    attn_bias: Float[Tensor, "prompt layer"]
    embed: Float[Tensor, " prompt"]
    constant: Float[Tensor, " prompt"]
    total: Float[Tensor, " prompt"]
    processing: dict[str, object]

    def to_records(self) -> list[dict[str, Any]]:
        """One row per component: mean and std over prompts (:func:`.blocks.dla_records`)."""
        from .blocks import dla_records

        return dla_records(self)

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import dla_blocks

        return tuple(dla_blocks(self))

    def _summary(self) -> str:
        top = max(self.to_records(), key=lambda r: abs(r["mean"]))
        return (f"{self.total.shape[0]} prompts, {self.heads.shape[1]} layers x "
                f"{self.heads.shape[2]} heads; total {float(self.total.double().mean()):.3f}, "
                f"largest {top['component']} {top['mean']:+.3f}")


def direct_logit_attribution(
    model: HookedModel,
    tokens: Tensor | Sequence[Sequence[int]],
    answer: Tensor | Sequence[int],
    foil: Tensor | Sequence[int] | None = None,
    *,
    padding_side: PaddingSide = "right",
) -> DirectLogitAttribution:
    """Split ``logit[answer] - logit[foil]`` (or ``logit[answer]``) at the last token by component.

    The final norm's scale is frozen at its value in this run (read at ``ln_final.hook_scale``).
    """
    toks = as_token_lists(tokens, "tokens")
    check_token_limits(model, toks, "tokens")
    n = len(toks)
    cfg = model.cfg
    ans = _targets(answer, n, int(cfg.d_vocab), "answer")[:, 0]
    direction = model.W_U[:, ans].T  # (prompt, d_model)
    if foil is not None:
        direction = direction - model.W_U[:, _targets(foil, n, int(cfg.d_vocab), "foil")[:, 0]].T
    has_norm = Site(None, "ln_final_scale").name in model.hook_dict
    last = LastToken()
    sites = [Site(None, "embed")] + ([Site(None, "pos_embed")] if "hook_pos_embed" in model.hook_dict else [])
    sites += [Site(layer, k) for layer in range(cfg.n_layers) for k in ("attn_z", "mlp_out")]
    sites += [Site(cfg.n_layers - 1, "resid_post")] + ([Site(None, "ln_final_scale")] if has_norm else [])
    run = run_with_interventions(model, toks, [Read(site=s, positions=last) for s in sites],
                                 padding_side=padding_side)  # full forward: ln_final's scale fires
    r = run.reads
    with torch.inference_mode():
        direction = direction.to(r[sites[0]].dtype)
        if has_norm:
            ln = model.ln_final
            center = not bool(getattr(ln, "uses_rms_norm", cfg.normalization_type in ("RMS", "RMSPre")))
            w = getattr(ln, "w", None)
            w = torch.ones(cfg.d_model) if w is None else w.detach()
            if bool(getattr(ln, "uses_rms_norm", False)) and bool(getattr(cfg, "rmsnorm_uses_offset", False)):
                w = w + 1
            scale = r[Site(None, "ln_final_scale")]  # (prompt, 1)
        else:
            center, w, scale = False, torch.ones(cfg.d_model), torch.ones(n, 1)

        def through_norm(x: Tensor) -> Tensor:  # (prompt, ..., d_model) -> logit-diff terms
            if center:
                x = x - x.mean(-1, keepdim=True)
            s = scale.reshape(n, *([1] * (x.ndim - 1)))
            d = direction.reshape(n, *([1] * (x.ndim - 2)), -1)
            return ((x / s) * w * d).sum(-1)

        embed = sum(through_norm(r[s]) for s in sites if s.layer is None and s.kind in ("embed", "pos_embed"))
        heads = torch.stack([
            through_norm(torch.einsum("phd,hdm->phm", r[Site(layer, "attn_z")], model.blocks[layer].attn.W_O))
            for layer in range(cfg.n_layers)], 1)
        b_o = [getattr(model.blocks[layer].attn, "b_O", None) for layer in range(cfg.n_layers)]
        attn_bias = torch.stack([
            through_norm(b.detach().expand(n, -1)) if b is not None else torch.zeros(n)
            for b in b_o], 1)
        mlps = torch.stack([through_norm(r[Site(layer, "mlp_out")]) for layer in range(cfg.n_layers)], 1)
        rows = torch.arange(n)
        logits = run.output[rows, run.batch.lengths - 1]
        total = logits[rows, ans]
        if foil is not None:
            total = total - logits[rows, _targets(foil, n, int(cfg.d_vocab), "foil")[:, 0]]
        constant = torch.zeros(n, dtype=direction.dtype)
        b_ln = getattr(model.ln_final, "b", None) if has_norm else None
        if b_ln is not None:
            constant = constant + direction @ b_ln.detach()
        b_u = getattr(model, "b_U", None)
        if b_u is not None:
            constant = constant + b_u.detach()[ans]
            if foil is not None:
                constant = constant - b_u.detach()[_targets(foil, n, int(cfg.d_vocab), "foil")[:, 0]]
    return DirectLogitAttribution(
        heads=heads.float(), mlps=mlps.float(), attn_bias=attn_bias.float(), embed=embed.float(),
        constant=constant.float(), total=total.float(), processing=weight_processing(model),
    )
