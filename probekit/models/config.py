"""Frozen configuration for the small decoder-only transformers probekit trains and analyses."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from ..errors import ConfigError
from ..util.config import check_keys
from ..util.constraints import SEED, Ge, OneOf, validate

NormType = Literal["LN", "LNPre", "RMS", "RMSPre"]
PosEmbed = Literal["standard", "rotary", "sinusoidal"]
ActFn = Literal["relu", "gelu", "gelu_new", "silu"]

_ACT_FNS = typing.get_args(ActFn)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of a TL-native decoder-only transformer (``TransformerBridge.boot_native``).

    ``normalization_type=None`` gives a model without LayerNorm (the modular-addition testbed,
    Nanda et al. 2023). ``n_key_value_heads < n_heads`` gives grouped-query attention.
    ``positional_embedding_type="sinusoidal"``: the fixed positions of Vaswani et al. (2017)
    written into ``W_pos`` and frozen (:func:`probekit.models.native.sinusoidal_positions`).

    Every field declares its type and rules (:mod:`probekit.util.constraints`), so the Python
    API, ``probekit train --set model.KEY=...`` and a diagnosis grid refuse a bad value with the
    same line (``ModelConfig.n_layers must be >= 1, got 0``). ``d_model`` need not be a multiple
    of ``n_heads``: every head has its own ``d_head`` (TransformerLens projects ``d_model`` to
    ``n_heads * d_head``).
    """

    #: every field's type is checked too (``d_model=8.0`` is refused), see :func:`validate`
    check_types: ClassVar[bool] = True

    n_layers: Annotated[int, Ge(1)]
    d_model: Annotated[int, Ge(1)]
    n_heads: Annotated[int, Ge(1)]
    d_head: Annotated[int, Ge(1)]
    d_vocab: Annotated[int, Ge(1)]
    n_ctx: Annotated[int, Ge(1)]
    d_mlp: Annotated[int | None, Ge(1, hint="or None for 4 * d_model")] = None
    act_fn: Annotated[str, OneOf(_ACT_FNS)] = "relu"
    normalization_type: NormType | None = "LN"
    positional_embedding_type: PosEmbed = "standard"
    n_key_value_heads: Annotated[int | None, Ge(1)] = None
    attn_only: bool = False
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules of every field (:func:`validate`), then the rules across fields."""
        validate(self)
        if self.n_key_value_heads is not None and self.n_heads % self.n_key_value_heads:
            raise ConfigError(
                f"ModelConfig.n_key_value_heads={self.n_key_value_heads} must divide "
                f"n_heads={self.n_heads}"
            )
        if self.positional_embedding_type == "rotary" and self.d_head % 2:
            raise ConfigError(
                f"ModelConfig.d_head={self.d_head}: rotary embeddings rotate pairs of dimensions, "
                "so d_head must be even; choose an even d_head or another positional_embedding_type"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the config (``from_dict`` inverts it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ``ConfigError``."""
        check_keys(data, (f.name for f in dataclasses.fields(cls)), what="ModelConfig")
        return cls(**data)
