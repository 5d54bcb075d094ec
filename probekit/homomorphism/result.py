"""Typed HE results: per layer x operator family x modifier/connective, with bootstrap CIs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from .config import HEConfig


@dataclass(frozen=True, kw_only=True, repr=False)
class HEResult(NotebookMixin):
    """Homomorphism error of one kind of composition (An & Du 2026).

    ``he[l]`` is [C]'s aggregation: held-out MSE (mean over pairs and dimensions) of each operator
    family, averaged over families. ``he_normalised[l]`` is ours: the same average of
    ``1 - R^2 = SSE / SST`` (held-out, pooled over dimensions), which does not scale with the
    size of the hidden states. CIs are percentile bootstraps over the scored pairs.

    Attributes:
        kind: ``"modifier"`` or ``"sequence"``.
        layers: block index of each row.
        families, groups: operator families; modifiers / connectives.
        mse, normalised: ``(layer, family)``.
        group_mse: ``(layer, family, group)`` held-out MSE over the pairs of each group (NaN
            where a group has no scored pair); the operator is shared by all groups [C].
        he, he_low, he_high: ``(layer,)`` mean over families and its CI.
        he_normalised, he_normalised_low, he_normalised_high: ``(layer,)``, ours.
        headline_layer: block whose values :attr:`headline` reports ([C]: the last block).
        n_pairs, n_fit, n_scored, group_counts: pair counts (scored pairs per group).
        config: the measurement's configuration.
        pair_he: ``(layer, score)`` per scored pair, the mean over families of its held-out
            squared error (``he`` is its mean over pairs; hypothesis claims resample it).
        pair_sq_dev: ``(layer, score)`` its squared deviation from the scored mean
            (``he_normalised = pair_he.sum(-1) / pair_sq_dev.sum(-1)``).
    """

    kind: str
    layers: tuple[int, ...]
    families: tuple[str, ...]
    groups: tuple[str, ...]
    mse: Float[np.ndarray, "layer family"]
    normalised: Float[np.ndarray, "layer family"]
    group_mse: Float[np.ndarray, "layer family group"]
    he: Float[np.ndarray, " layer"]
    he_low: Float[np.ndarray, " layer"]
    he_high: Float[np.ndarray, " layer"]
    he_normalised: Float[np.ndarray, " layer"]
    he_normalised_low: Float[np.ndarray, " layer"]
    he_normalised_high: Float[np.ndarray, " layer"]
    headline_layer: int
    n_pairs: int
    n_fit: int
    n_scored: int
    group_counts: tuple[int, ...]
    config: HEConfig
    pair_he: Float[np.ndarray, "layer score"] | None = None
    pair_sq_dev: Float[np.ndarray, "layer score"] | None = None

    @property
    def _row(self) -> int:
        return self.layers.index(self.headline_layer)

    @property
    def headline(self) -> float:
        """[C]'s HE: mean over families of held-out MSE at the headline layer."""
        return float(self.he[self._row])

    @property
    def headline_normalised(self) -> float:
        """Ours: mean over families of held-out ``1 - R^2`` at the headline layer."""
        return float(self.he_normalised[self._row])

    def table(self) -> str:
        """Plain-text table: layer x family MSE, HE [CI], normalised HE (ours) [CI]."""
        head = ["layer", *self.families, "HE [C]", "95% CI", "1-R^2 (ours)", "95% CI"]
        lines = ["  ".join(f"{h:>12}" for h in head)]
        for i, layer in enumerate(self.layers):
            cells = [f"{layer:>12d}", *(f"{v:>12.5g}" for v in self.mse[i])]
            ci = f"[{self.he_low[i]:.3g}, {self.he_high[i]:.3g}]"
            cells += [f"{self.he[i]:>12.5g}", ci.rjust(12)]
            cells += [
                f"{self.he_normalised[i]:>12.4g}",
                f"[{self.he_normalised_low[i]:.3g}, {self.he_normalised_high[i]:.3g}]".rjust(12),
            ]
            lines.append("  ".join(cells))
        return "\n".join(lines)

    def to_records(self) -> list[dict[str, Any]]:
        """One row per layer: HE [C] with its CI, 1 - R^2 (ours) with its CI, MSE per family."""
        out = []
        for i, layer in enumerate(self.layers):
            rec: dict[str, Any] = {
                "kind": self.kind, "layer": int(layer), "he": float(self.he[i]),
                "he_low": float(self.he_low[i]), "he_high": float(self.he_high[i]),
                "he_normalised": float(self.he_normalised[i]),
                "he_normalised_low": float(self.he_normalised_low[i]),
                "he_normalised_high": float(self.he_normalised_high[i]),
            }
            rec.update({f"mse/{f}": float(v) for f, v in zip(self.families, self.mse[i])})
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import he_blocks

        return tuple(he_blocks({self.kind: self}, [f"L{layer}" for layer in self.layers]))

    def _summary(self) -> str:
        return (f"{self.kind}, {len(self.layers)} layers, {self.n_pairs} pairs; headline layer "
                f"{self.headline_layer}: HE {self.headline:.4g}, 1 - R^2 "
                f"{self.headline_normalised:.4g}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (arrays as nested lists; NaN stays NaN; no per-pair arrays)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name.startswith("pair_"):
                continue
            v = getattr(self, name)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif name == "config":
                v = {k: getattr(v, k) for k in v.__dataclass_fields__}
            out[name] = v
        out["headline"] = self.headline
        out["headline_normalised"] = self.headline_normalised
        return out
