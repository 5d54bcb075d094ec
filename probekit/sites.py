"""Typed hook sites: ``Site(layer, kind, head)`` -> TransformerLens hook name, validated up front.

A leaf module (imports nothing from probekit but :mod:`probekit.errors`), so the store, capture,
interventions and every method module can name sites without importing each other.

Layout conventions (shared by capture and interventions; ``pos`` is always axis 1):

- residual-width kinds: ``(batch, pos, d_model)``; MLP kinds ``(batch, pos, d_mlp)``;
- per-head kinds (:data:`HEAD_KINDS`): ``(batch, pos, head, d)``; with ``head=h`` the head axis is
  dropped: ``(batch, pos, d)``;
- ``attn_pattern`` is re-laid out from TL's ``(batch, head, query, key)`` to
  ``(batch, query, head, key)`` so position rules select *query* positions;
- ``ln1_scale``/``ln2_scale``/``ln_final_scale``: ``(batch, pos, 1)``.

Grouped-query attention: ``attn_k``, ``attn_v``, ``k_input`` and ``v_input`` have one entry per
*key/value* head (``cfg.n_key_value_heads``); their ``head`` index is a KV-head index. Query head
``h`` reads KV head ``h // (n_heads // n_key_value_heads)`` (:func:`kv_head_of`).

Sites are keyed by ``Site`` everywhere: on the TransformerBridge ``blocks.N.hook_resid_post`` is an
alias of ``blocks.N.hook_out`` and TL reports the latter name inside hooks, so never key results by
the name a hook reports.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from .errors import ConfigError
from .models.protocol import HookedModel

# Per-block kinds: kind -> hook-name suffix after "blocks.{layer}.".
_BLOCK_SUFFIX: dict[str, str] = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "mlp_in": "hook_mlp_in",
    "mlp_pre": "mlp.hook_pre",
    "mlp_pre_linear": "mlp.hook_pre_linear",  # gated MLPs (Llama up_proj); absent otherwise
    "mlp_post": "mlp.hook_post",
    "attn_z": "attn.hook_z",
    "attn_q": "attn.hook_q",
    "attn_k": "attn.hook_k",
    "attn_v": "attn.hook_v",
    "attn_pattern": "attn.hook_pattern",
    "attn_result": "attn.hook_result",
    "q_input": "hook_q_input",
    "k_input": "hook_k_input",
    "v_input": "hook_v_input",
    "ln1_scale": "ln1.hook_scale",
    "ln2_scale": "ln2.hook_scale",
}
# Model-level kinds (layer must be None).
_GLOBAL_NAME: dict[str, str] = {
    "embed": "hook_embed",
    "pos_embed": "hook_pos_embed",
    "ln_final": "ln_final.hook_normalized",
    "ln_final_scale": "ln_final.hook_scale",
}
SITE_KINDS: tuple[str, ...] = tuple(_BLOCK_SUFFIX) + tuple(_GLOBAL_NAME)

#: Kinds with a head axis (axis 2 in probekit's layout).
HEAD_KINDS: frozenset[str] = frozenset(
    {"attn_z", "attn_q", "attn_k", "attn_v", "attn_pattern", "attn_result", "q_input", "k_input",
     "v_input"}
)
#: Head kinds indexed by key/value head under grouped-query attention.
KV_HEAD_KINDS: frozenset[str] = frozenset({"attn_k", "attn_v", "k_input", "v_input"})

#: Kinds whose hook only fires once a bridge flag is set: kind -> ``cfg`` flag. The hook scope
#: sets the flag for its duration and restores it on exit.
GATED_KINDS: dict[str, str] = {
    "attn_result": "use_attn_result",
    "q_input": "use_split_qkv_input",
    "k_input": "use_split_qkv_input",
    "v_input": "use_split_qkv_input",
    "mlp_in": "use_hook_mlp_in",
}


class UnknownSiteError(ConfigError, KeyError):
    """A site the model has no hook point (or head) for; also a ``KeyError`` for older callers."""

    def __str__(self) -> str:  # KeyError would quote the message
        """The message, unquoted."""
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Site:
    """A place in the model: a block ``layer`` (0-indexed), a hook ``kind`` and optionally a head.

    ``Site(3, "resid_post").name == "blocks.3.hook_resid_post"``; model-level kinds (``embed``,
    ``pos_embed``, ``ln_final``, ``ln_final_scale``) take ``layer=None``. ``head`` (only for
    :data:`HEAD_KINDS`) selects one head: a query head, or a key/value head for
    :data:`KV_HEAD_KINDS`. ``str(site)`` (:attr:`key`) is unique per site, ``name`` is the hook
    point (shared by all heads of a layer).
    """

    layer: int | None
    kind: str
    head: int | None = None

    def __post_init__(self) -> None:
        """Validate kind, layer and head (not against a model: see :meth:`validate`)."""
        if self.kind not in SITE_KINDS:
            close = difflib.get_close_matches(str(self.kind), SITE_KINDS, n=3)
            raise ConfigError(
                f"unknown site kind {self.kind!r}; valid kinds are {list(SITE_KINDS)}"
                + (f" (did you mean {close}?)" if close else "")
            )
        if self.kind in _GLOBAL_NAME:
            if self.layer is not None:
                raise ConfigError(f"site kind {self.kind!r} is model-level: use layer=None")
        elif isinstance(self.layer, bool) or not isinstance(self.layer, int) or self.layer < 0:
            raise ConfigError(
                f"site kind {self.kind!r} needs a block index layer >= 0, got {self.layer!r} "
                f"({type(self.layer).__name__}); pass an int, e.g. Site(3, {self.kind!r})"
            )
        if self.head is not None:
            if self.kind not in HEAD_KINDS:
                raise ConfigError(
                    f"site kind {self.kind!r} has no head axis, got head={self.head}; heads exist "
                    f"for {sorted(HEAD_KINDS)} (use head=None)"
                )
            if isinstance(self.head, bool) or not isinstance(self.head, int) or self.head < 0:
                raise ConfigError(f"head must be an int >= 0 or None, got {self.head!r}")

    @property
    def name(self) -> str:
        """The TransformerLens hook-point name (the same for every head of a layer)."""
        if self.kind in _GLOBAL_NAME:
            return _GLOBAL_NAME[self.kind]
        return f"blocks.{self.layer}.{_BLOCK_SUFFIX[self.kind]}"

    @property
    def key(self) -> str:
        """A unique string for this site: :attr:`name`, plus ``:HEAD`` for a head site."""
        return self.name if self.head is None else f"{self.name}:{self.head}"

    @property
    def short(self) -> str:
        """``KIND@LAYER`` (``KIND@LAYER:HEAD``), or the kind for model-level sites."""
        base = self.kind if self.layer is None else f"{self.kind}@{self.layer}"
        return base if self.head is None else f"{base}:{self.head}"

    @property
    def without_head(self) -> Site:
        """The same hook with all heads."""
        return Site(self.layer, self.kind)

    def _sort_key(self) -> tuple[int, str, int]:
        return (-1 if self.layer is None else self.layer, self.kind,
                -1 if self.head is None else self.head)

    def __lt__(self, other: Site) -> bool:
        """Order by layer (model-level first), kind, head."""
        return self._sort_key() < other._sort_key()

    def __str__(self) -> str:
        """:attr:`key`."""
        return self.key

    @classmethod
    def parse(cls, text: object) -> Site:
        """Parse ``"resid_post@3"``, ``"3.resid_post"``, ``"embed"`` or a hook name; ``:H`` = head.

        Raises:
            ConfigError: ``text`` is not a string (e.g. a bare layer number) or not a site.
        """
        if not isinstance(text, str):
            raise ConfigError(
                f"Site.parse expects a string like 'resid_post@3', got {type(text).__name__} "
                f"{text!r}; for a layer number write Site({text!r}, 'resid_post') or "
                f"Site.parse('resid_post@{text}')"
            )
        text = text.strip()
        if (block := parse_block_text(text)) is not None:
            return cls(block[1], block[0], block[2])
        head: int | None = None
        if ":" in text:
            text, _, head_text = text.rpartition(":")
            try:
                head = int(head_text)
            except ValueError:
                raise ConfigError(
                    f"site {text}:{head_text}: head {head_text!r} is not an integer"
                ) from None
        if text in _GLOBAL_NAME:
            return cls(None, text, head)
        for kind, name in _GLOBAL_NAME.items():
            if text == name:
                return cls(None, kind, head)
        if "@" in text:
            kind, layer = text.split("@", 1)
            return cls(_parse_layer(layer, text), kind, head)
        if text.startswith("blocks."):
            parts = text.split(".", 2)
            if len(parts) == 3:
                for kind, suffix in _BLOCK_SUFFIX.items():
                    if parts[2] == suffix:
                        return cls(_parse_layer(parts[1], text), kind, head)
        elif "." in text:
            layer, kind = text.split(".", 1)
            return cls(_parse_layer(layer, text), kind, head)
        raise ConfigError(
            f"cannot parse site {text!r}: write 'KIND@LAYER' (e.g. 'resid_post@3', "
            f"'attn_z@3:2' for head 2), a hook name ('blocks.3.hook_resid_post') or a model-level "
            f"kind {list(_GLOBAL_NAME)}"
        )

    def n_heads(self, model: HookedModel) -> int:
        """Heads on this site's head axis: query heads, or KV heads for :data:`KV_HEAD_KINDS`."""
        cfg = model.cfg
        if self.kind in KV_HEAD_KINDS:
            return int(getattr(cfg, "n_key_value_heads", None) or cfg.n_heads)
        return int(cfg.n_heads)

    def validate(self, model: HookedModel, hook_names: Collection[str] | None = None) -> None:
        """Raise :class:`~probekit.errors.ConfigError` if ``model`` has no such hook point/head.

        ``hook_names``: ``model.hook_dict`` if the caller has it already (a bridge rebuilds it
        on every access).
        """
        n_layers = model.cfg.n_layers
        if self.layer is not None and self.layer >= n_layers:
            raise UnknownSiteError(
                f"site {self.short!r} ({self.name}): layer {self.layer} out of range, model has {n_layers} "
                f"layers (0..{n_layers - 1})"
            )
        if hook_names is None:
            hook_names = model.hook_dict
        if self.name not in hook_names:
            close = difflib.get_close_matches(self.name, list(hook_names), n=3)
            raise UnknownSiteError(
                f"no hook point {self.name!r} in this model ({n_layers} layers); did you mean "
                f"{close}? valid site kinds: {list(SITE_KINDS)}"
            )
        if self.head is not None:
            n = self.n_heads(model)
            if self.head >= n:
                what = "key/value heads" if self.kind in KV_HEAD_KINDS else "query heads"
                gqa = ""
                if self.kind in KV_HEAD_KINDS and n != model.cfg.n_heads:
                    gqa = (f" (grouped-query attention: {model.cfg.n_heads} query heads share "
                           f"them; query head h reads KV head h // {model.cfg.n_heads // n})")
                raise UnknownSiteError(
                    f"site {self.short!r}: head {self.head} out of range, this model has {n} "
                    f"{what} (0..{n - 1}){gqa}; pass a head index below {n}"
                )


def kv_head_of(model: HookedModel, query_head: int) -> int:
    """Return the key/value head that query head ``query_head`` reads (grouped-query attention)."""
    n_heads = int(model.cfg.n_heads)
    n_kv = int(getattr(model.cfg, "n_key_value_heads", None) or n_heads)
    if not 0 <= query_head < n_heads:
        raise ConfigError(f"query head {query_head} out of range 0..{n_heads - 1}")
    return query_head // (n_heads // n_kv)


#: ``KIND@LAYER[:HEAD]``, LAYER possibly negative (counted from the last block by a caller that
#: knows the depth: :mod:`probekit.diagnosis.block_index`)
_BLOCK_TEXT = re.compile(r"^(?P<kind>[A-Za-z_]+)@(?P<layer>-?\d+)(?::(?P<head>\d+))?$")


def parse_block_text(text: str) -> tuple[str, int, int | None] | None:
    """``(kind, layer, head)`` of a ``KIND@LAYER[:HEAD]`` site string, the layer as written.

    ``"resid_post@-1"`` -> ``("resid_post", -1, None)``; ``"attn_z@3:2"`` -> ``("attn_z", 3, 2)``.
    A negative layer is returned as is (:meth:`Site.parse` refuses it; a population of depths
    resolves it per model). ``None`` for the other spellings (hook names, ``L.KIND``, model-level
    kinds) and for text that is not a site.
    """
    m = _BLOCK_TEXT.match(text.strip())
    if m is None:
        return None
    return m["kind"], int(m["layer"]), None if m["head"] is None else int(m["head"])


def _parse_layer(text: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"site {whole!r}: layer {text!r} is not an integer") from None


def all_layers(model: HookedModel, kind: str = "resid_post") -> tuple[Site, ...]:
    """One site of ``kind`` per block of ``model``."""
    return tuple(Site(layer, kind) for layer in range(model.cfg.n_layers))


def all_heads(model: HookedModel, kind: str = "attn_z", layers: Iterable[int] | None = None) -> tuple[Site, ...]:
    """One head site of ``kind`` per (layer, head) of ``model`` (KV heads for K/V kinds)."""
    layer_list = range(model.cfg.n_layers) if layers is None else list(layers)
    n = Site(0, kind).n_heads(model)
    return tuple(Site(layer, kind, h) for layer in layer_list for h in range(n))


def as_sites(sites: Iterable[Site | str]) -> tuple[Site, ...]:
    """Normalise a mix of :class:`Site` and strings; reject duplicates."""
    out = tuple(s if isinstance(s, Site) else Site.parse(s) for s in sites)
    if not out:
        raise ConfigError("no sites given: pass at least one Site, e.g. Site(0, 'resid_post')")
    dupes = sorted({s.key for s in out if sum(t == s for t in out) > 1})
    if dupes:
        raise ConfigError(f"duplicate sites {dupes}: give each site once")
    return out


def validate_sites(model: HookedModel, sites: Sequence[Site]) -> None:
    """Validate every site against ``model`` (before any hook is attached).

    ``model.hook_dict`` is read once (a transformer-lens bridge rebuilds it on each access: it
    was 10% of a step of cached greedy decoding under 60 ops) and each distinct site checked once.
    """
    hook_names = model.hook_dict
    for site in dict.fromkeys(sites):
        site.validate(model, hook_names)


def site_label(site: Site | str | None) -> str:
    """Short label of a site as suites and reports spell it: ``"resid_post@3"``, ``"embed"``.

    Hook names (``"blocks.3.hook_resid_post"``) are parsed first; a string that is not a site
    (e.g. ``"acts"`` of an unnamed stack) is returned unchanged, ``None`` as ``"-"``.
    """
    if site is None:
        return "-"
    if isinstance(site, str):
        try:
            site = Site.parse(site)
        except ValueError:
            return site
    return site.kind if site.layer is None else f"{site.kind}@{site.layer}"
