"""A measurement kind defined in the user's own code, outside probekit.

``claims.toml`` and ``diagnose.toml`` next to this file name it in ``[plugins] modules =
["my_markers"]``; probekit imports it (from this folder) before checking their claims and
markers, and every executor's workers import it before their first task.

``embedding_row_norm``: the L2 norm of each token's row of the embedding ``W_E`` (or of each
token's column of the unembedding ``W_U``), one value per token; the claim's CI is the
bootstrap over tokens of their mean. Weight decay shrinks these norms (Nanda et al. 2023,
"Progress measures for grokking via mechanistic interpretability", ICLR, §5.1 reads the total
sum of squared weights); here per token, so it has a sampling unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from probekit.hypotheses import Measurement, register_measurement


@dataclass(frozen=True, kw_only=True)
class RowNormSpec:
    """Keys of an ``embedding_row_norm`` claim or marker.

    Attributes:
        matrix: ``"W_E"`` (a token's embedding row) or ``"W_U"`` (its unembedding column).
        tokens: the first ``tokens`` token ids only (e.g. the ``p`` residues of modular
            addition, not the ``=`` token); ``None``: every token.
    """

    matrix: Literal["W_E", "W_U"] = "W_E"
    tokens: int | None = None


@register_measurement("embedding_row_norm", spec=RowNormSpec)
def embedding_row_norm(spec: RowNormSpec, ctx: Any) -> Measurement:
    """Mean L2 norm of the tokens' embedding rows (one value per token)."""
    weight = getattr(ctx.model, spec.matrix).detach().double().cpu()
    rows = weight if spec.matrix == "W_E" else weight.T  # (vocabulary, d_model)
    norms = rows[: spec.tokens].norm(dim=1).numpy()
    return Measurement(
        metric=f"mean {spec.matrix} token norm", values=norms, n=int(norms.size), unit="tokens",
        method=f"L2 norm of each token's {spec.matrix} vector; bootstrap over tokens",
    )
