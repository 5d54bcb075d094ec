"""``[[patching]]``: activation / attribution patching grids over clean-corrupt prompt pairs.

For each site kind, one grid over the suite's prompt pairs (rows paired by ``pair_column``,
``role_column`` = ``"clean"`` / ``"corrupt"``): residual-width kinds (``resid_pre``,
``attn_out``, ``mlp_out`` ...) by layer x position, head kinds (``attn_z`` ...) by layer x head
(the head at every position). Metric: ``logit(clean answer) - logit(corrupt answer)`` at the
last token (Wang et al. 2022) or the clean answer's log-probability. ``method``: exact
activation patching (:func:`probekit.circuits.activation_patching`), attribution patching
(:func:`probekit.circuits.attribution_patching`, Nanda 2023; Syed et al. 2023) or both with
their correlation; ``window`` patches blocks ``l..l+w-1`` of a cell together. ``edges``: also
edge attribution over the residual graph (EAP or EAP-IG, :func:`probekit.circuits.edge_attribution`;
Syed et al. 2023, Hanna et al. 2024) with the top edges and the faithfulness curve of the top-k
circuits. The same grids back ``probekit patch MODEL DATA`` (:mod:`probekit.suites.patch_cli`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ...context import RunContext
from ...errors import KeyedValueError
from ...util.constraints import Distinct, Each, Ge, NonEmpty, Validated
from ..registry import register_analysis
from ..result import AnalysisResult

__all__ = ["PATCH_KINDS", "PatchingSpec", "patching_grids", "run_patching"]

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


def patching_grids(
    model: Any, clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]],
    spec: PatchingSpec, *, answer: Sequence[int], foil: Sequence[int], vocab: Any = None,
    reduced: Sequence[str] = (),
) -> AnalysisResult:
    """The ``[[patching]]`` section of the pairs: :func:`probekit.circuits.patching_grids`.

    ``answer``/``foil``: the clean and corrupt rows' answer token ids (one per pair);
    ``reduced``: the answers scored by their first token (``answer_tokens = "first"``).
    """
    from ...circuits import patching_grids as grids

    res = grids(model, clean, corrupt, spec, answer=answer, foil=foil, vocab=vocab,
                reduced=reduced)
    return AnalysisResult(section="patching", title=f"Patching ({', '.join(spec.kinds)})",
                          data=res.data, blocks=res.blocks, warnings=res.warnings)


@register_analysis("patching", spec=PatchingSpec)
def run_patching(spec: PatchingSpec, ctx: RunContext) -> AnalysisResult:
    """Patching grids over the suite's clean/corrupt prompt pairs (Meng et al. 2022; Nanda 2023)."""
    from ...circuits import answer_ids

    ex = ctx.examples
    clean_idx, corrupt_idx = ex.pairs(pair_column=spec.pair_column, role_column=spec.role_column)
    model = ctx.model
    answers = ex.column(spec.answer_column)
    order = [*clean_idx.tolist(), *corrupt_idx.tolist()]
    ids, reduced = answer_ids(
        model, [answers[i] for i in order],
        [f"row {i} ({'clean' if k < len(clean_idx) else 'corrupt'})" for k, i in enumerate(order)],
        ex.vocab, answer_tokens=spec.answer_tokens,
    )
    return patching_grids(
        model, [ex.tokens[i] for i in clean_idx], [ex.tokens[i] for i in corrupt_idx], spec,
        answer=ids[:len(clean_idx)], foil=ids[len(clean_idx):], vocab=ex.vocab, reduced=reduced,
    )
