"""Typed hook sites: ``Site(layer, kind)`` -> TransformerLens hook name, validated up front."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError

SiteKind = Literal[
    "resid_pre",
    "resid_mid",
    "resid_post",
    "attn_out",
    "mlp_out",
    "mlp_pre",
    "mlp_post",
    "attn_z",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_pattern",
    "embed",
    "pos_embed",
    "ln_final",
]

# Per-block kinds: kind -> hook-name suffix after "blocks.{layer}.".
_BLOCK_SUFFIX: dict[str, str] = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "mlp_pre": "mlp.hook_pre",
    "mlp_post": "mlp.hook_post",
    "attn_z": "attn.hook_z",
    "attn_q": "attn.hook_q",
    "attn_k": "attn.hook_k",
    "attn_v": "attn.hook_v",
    "attn_pattern": "attn.hook_pattern",
}
# Model-level kinds (layer must be None).
_GLOBAL_NAME: dict[str, str] = {
    "embed": "hook_embed",
    "pos_embed": "hook_pos_embed",
    "ln_final": "ln_final.hook_normalized",
}
SITE_KINDS: tuple[str, ...] = tuple(_BLOCK_SUFFIX) + tuple(_GLOBAL_NAME)


class UnknownSiteError(ConfigError, KeyError):
    """A site the model has no hook point for (also a ``KeyError`` for older callers)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, order=True)
class Site:
    """A place in the model to read: a block ``layer`` (0-indexed) and a hook ``kind``.

    ``Site(3, "resid_post").name == "blocks.3.hook_resid_post"``; model-level kinds
    (``embed``, ``pos_embed``, ``ln_final``) take ``layer=None``.
    """

    layer: int | None
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in SITE_KINDS:
            close = difflib.get_close_matches(str(self.kind), SITE_KINDS, n=3)
            raise ConfigError(
                f"unknown site kind {self.kind!r}; valid kinds are {list(SITE_KINDS)}"
                + (f" (did you mean {close}?)" if close else "")
            )
        if self.kind in _GLOBAL_NAME:
            if self.layer is not None:
                raise ConfigError(f"site kind {self.kind!r} is model-level: use layer=None")
        elif not isinstance(self.layer, int) or self.layer < 0:
            raise ConfigError(
                f"site kind {self.kind!r} needs a block index layer >= 0, got {self.layer!r}"
            )

    @property
    def name(self) -> str:
        """The TransformerLens hook-point name."""
        if self.kind in _GLOBAL_NAME:
            return _GLOBAL_NAME[self.kind]
        return f"blocks.{self.layer}.{_BLOCK_SUFFIX[self.kind]}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> Site:
        """Parse ``"resid_post@3"``, ``"3.resid_post"``, ``"embed"`` or a full hook name."""
        text = text.strip()
        if text in _GLOBAL_NAME:
            return cls(None, text)
        for kind, name in _GLOBAL_NAME.items():
            if text == name:
                return cls(None, kind)
        if "@" in text:
            kind, layer = text.split("@", 1)
            return cls(_parse_layer(layer, text), kind)
        if text.startswith("blocks."):
            parts = text.split(".", 2)
            if len(parts) == 3:
                for kind, suffix in _BLOCK_SUFFIX.items():
                    if parts[2] == suffix:
                        return cls(_parse_layer(parts[1], text), kind)
        elif "." in text:
            layer, kind = text.split(".", 1)
            return cls(_parse_layer(layer, text), kind)
        raise ConfigError(
            f"cannot parse site {text!r}: write 'KIND@LAYER' (e.g. 'resid_post@3'), a hook name "
            f"('blocks.3.hook_resid_post') or a model-level kind {list(_GLOBAL_NAME)}"
        )

    def validate(self, model: Any) -> None:
        """Raise ``KeyError`` naming close matches if ``model`` has no such hook point."""
        n_layers = model.cfg.n_layers
        if self.layer is not None and self.layer >= n_layers:
            raise UnknownSiteError(
                f"site {self.name!r}: layer {self.layer} out of range, model has {n_layers} "
                f"layers (0..{n_layers - 1})"
            )
        hook_names = model.hook_dict
        if self.name not in hook_names:
            close = difflib.get_close_matches(self.name, list(hook_names), n=3)
            raise UnknownSiteError(
                f"no hook point {self.name!r} in this model ({n_layers} layers); did you mean "
                f"{close}? valid site kinds: {list(SITE_KINDS)}"
            )


def _parse_layer(text: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"site {whole!r}: layer {text!r} is not an integer") from None


def all_layers(model: Any, kind: str = "resid_post") -> tuple[Site, ...]:
    """One site of ``kind`` per block of ``model``."""
    return tuple(Site(layer, kind) for layer in range(model.cfg.n_layers))


def as_sites(sites: Iterable[Site | str]) -> tuple[Site, ...]:
    """Normalise a mix of :class:`Site` and strings; reject duplicates."""
    out = tuple(s if isinstance(s, Site) else Site.parse(s) for s in sites)
    if not out:
        raise ConfigError("no sites given: pass at least one Site, e.g. Site(0, 'resid_post')")
    dupes = sorted({s.name for s in out if sum(t == s for t in out) > 1})
    if dupes:
        raise ConfigError(f"duplicate sites {dupes}")
    return out


def validate_sites(model: Any, sites: Sequence[Site]) -> None:
    for site in sites:
        site.validate(model)
