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
from typing import Any

from ...context import RunContext
from ..patch_spec import PATCH_KINDS, PatchingSpec
from ..registry import register_analysis
from ..result import AnalysisResult

__all__ = ["PATCH_KINDS", "PatchingSpec", "patching_grids", "run_patching"]

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
