"""Frozen configuration for the small decoder-only transformers probekit trains and analyses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from ..util.config import check_keys

NormType = Literal["LN", "LNPre", "RMS", "RMSPre"]
PosEmbed = Literal["standard", "rotary", "sinusoidal"]

_ACT_FNS = ("relu", "gelu", "gelu_new", "silu")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of a TL-native decoder-only transformer (``TransformerBridge.boot_native``).

    ``normalization_type=None`` gives a model without LayerNorm (the modular-addition testbed,
    Nanda et al. 2023). ``n_key_value_heads < n_heads`` gives grouped-query attention.
    ``positional_embedding_type="sinusoidal"``: the fixed positions of Vaswani et al. (2017)
    written into ``W_pos`` and frozen (:func:`probekit.models.native.sinusoidal_positions`).
    """

    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    d_vocab: int
    n_ctx: int
    d_mlp: int | None = None
    act_fn: str = "relu"
    normalization_type: NormType | None = "LN"
    positional_embedding_type: PosEmbed = "standard"
    n_key_value_heads: int | None = None
    attn_only: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "d_head", "d_vocab", "n_ctx"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.d_mlp is not None and self.d_mlp < 1:
            raise ConfigError(f"ModelConfig.d_mlp must be positive or None, got {self.d_mlp}")
        if self.act_fn not in _ACT_FNS:
            raise ConfigError(f"ModelConfig.act_fn={self.act_fn!r}; choose one of {_ACT_FNS}")
        if self.positional_embedding_type not in ("standard", "rotary", "sinusoidal"):
            raise ConfigError(
                f"ModelConfig.positional_embedding_type={self.positional_embedding_type!r}; "
                "choose 'standard' (learned), 'rotary' or 'sinusoidal' (fixed)"
            )
        if self.n_key_value_heads is not None and (
            self.n_key_value_heads < 1 or self.n_heads % self.n_key_value_heads
        ):
            raise ConfigError(
                f"ModelConfig.n_key_value_heads={self.n_key_value_heads} must divide "
                f"n_heads={self.n_heads}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the config (``from_dict`` inverts it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ``ConfigError``."""
        check_keys(data, (f.name for f in dataclasses.fields(cls)), what="ModelConfig")
        return cls(**data)
