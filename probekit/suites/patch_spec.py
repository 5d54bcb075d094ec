"""The keys of a ``[[patching]]`` table and the flags of ``probekit patch``: :class:`PatchingSpec`.

Light on purpose (no numpy, no torch): ``probekit patch``'s flags are generated from it when
the command-line parser is built (:mod:`probekit.util.cli_options`), and validating a suite
imports it. The analysis itself is :mod:`probekit.suites.analyses.patching`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ..errors import KeyedValueError
from ..util.constraints import Distinct, Each, Ge, NonEmpty, Validated

__all__ = ["PATCH_KINDS", "AnswerTokens", "PatchingSpec"]

PATCH_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post",
               "attn_z", "attn_q", "attn_k", "attn_v")
AnswerTokens = Literal["single", "first"]  # = probekit.circuits.AnswerTokens (kept light here)


@dataclass(frozen=True, kw_only=True)
class PatchingSpec(Validated):
    """One ``[[patching]]`` table.

    Attributes:
        kinds: site kinds, one grid each (``resid_pre``/``resid_mid``/``resid_post``/
            ``attn_out``/``mlp_out``/``mlp_post`` by layer x position; ``attn_z``/``attn_q``/
            ``attn_k``/``attn_v`` by layer x head).
        method: ``"activation"`` (exact, one patched run per cell, batched), ``"attribution"``
            (one forward + one backward) or ``"both"`` (and their Pearson correlation).
        metric: ``"logit_diff"`` (clean answer vs corrupt answer) or ``"answer_logprob"``.
        direction: ``"denoise"`` (clean activations into the corrupt run) or ``"noise"``.
        answer_column: each row's answer (a token id, or text of one token).
        answer_tokens: ``"single"`` refuses a multi-token answer; ``"first"`` scores such an
            answer by its first token (recorded in the report, with a warning).
        pair_column, role_column: pair rows into clean / corrupt prompts.
        layers: blocks to patch (default all).
        window: blocks patched together per cell (``l..l+window-1``; activation method only).
        head_grid: head kinds by ``"layer_head"`` (each head at every position) or
            ``"layer_pos_head"`` (each head at each position; shown as (layer, head) rows x
            position columns).
        edges: ``"none"``, ``"eap"`` or ``"eap-ig"``: also score every edge of the residual
            graph and evaluate the top-k edge circuits (complement patched to corrupt).
        edge_ks: circuit sizes of the faithfulness curve (the whole graph is added).
        edge_top: edges listed in the report table.
        batch_size: patched (pair, cell) rows per forward pass.
    """

    kinds: tuple[str, ...] = ("resid_pre", "attn_out", "mlp_out", "attn_z")
    method: Literal["activation", "attribution", "both"] = "activation"
    metric: Literal["logit_diff", "answer_logprob"] = "logit_diff"
    direction: Literal["denoise", "noise"] = "denoise"
    answer_column: str = "answer"
    pair_column: str = "pair_id"
    role_column: str = "role"
    layers: Annotated[tuple[int, ...], Each(Ge(0, hint="block indices")), Distinct()] = ()
    window: Annotated[int, Ge(1, hint="1 = one block per cell")] = 1
    head_grid: Literal["layer_head", "layer_pos_head"] = "layer_head"
    edges: Literal["none", "eap", "eap-ig"] = "none"
    edge_ks: Annotated[tuple[int, ...], NonEmpty(hint="circuit sizes, e.g. [10, 100]"), Each(Ge(1, hint="circuit sizes")),
                       Distinct()] = (10, 100, 1000)
    edge_top: Annotated[int, Ge(1)] = 20
    batch_size: Annotated[int, Ge(1)] = 64
    answer_tokens: AnswerTokens = "single"

    def __post_init__(self) -> None:
        """The declared rules, then unknown kinds, an empty kind list and a window without exact patching."""
        super().__post_init__()  # answer_tokens: its Literal choices
        bad = [k for k in self.kinds if k not in PATCH_KINDS]
        if bad or not self.kinds:
            what = f"{bad[0]!r} is not a patching kind" if bad else "no kind given"
            raise ValueError(f"kinds {list(self.kinds)}: {what}; choose from {list(PATCH_KINDS)}")
        if len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds {list(self.kinds)} lists a kind twice; give each once")
        if self.window > 1 and self.method != "activation":
            raise KeyedValueError("window",
                f"window = {self.window} needs method = 'activation' (got {self.method!r}): "
                "attribution patching estimates single-block cells only"
            )
