"""One patching grid: the arguments, axes and result shared by exact and attribution patching.

(The grids of a whole patching run, one per site kind, for the report: :mod:`.patching_report`.)

:func:`~probekit.circuits.activation_patching` and
:func:`~probekit.circuits.attribution_patching` take the same arguments (clean/corrupt prompts,
``kind``, ``by``, ``direction``, ``layers``, ``window``) and return the same
:class:`PatchingResult`; :func:`prepare_grid` validates them once into a :class:`Grid` and
:func:`grid_result` turns per-pair cell values into the result (pair mean, normalised effect,
labelled axes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import ConfigError, DataError, KeyedValueError, NonFiniteError
from ..models.protocol import HookedModel
from ..report.blocks import Block, Text
from ..report.notebook import NotebookMixin
from ..sites import HEAD_KINDS, Site
from ..util.constraints import Ge, OneOf, Validated
from ..util.list_option import check_list_option
from .metrics import as_pair_metric

Metric = Callable[[Tensor, Tensor], Tensor]
RESID_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post")
HEAD_PATCH_KINDS = ("attn_z", "attn_q", "attn_k", "attn_v")
#: Grid axes -> the kinds they fit.
BY_KINDS = {
    ("layer", "pos"): RESID_KINDS + HEAD_PATCH_KINDS,
    ("layer", "head"): HEAD_PATCH_KINDS,
    ("layer", "pos", "head"): HEAD_PATCH_KINDS,
}


@dataclass(frozen=True, repr=False)
class PatchingResult(NotebookMixin):
    """A patching grid: the metric per cell, its normalised effect, and labelled axes.

    ``values`` is the metric averaged over pairs (cells a pair does not have are skipped),
    ``per_pair`` keeps every pair (NaN where the pair is too short), ``normalized`` is
    ``(values - base.mean()) / (source.mean() - base.mean())``. ``method``: ``"activation"``
    (exact patching) or ``"attribution"`` (its gradient estimate).
    """

    values: Float[Tensor, "*grid"]
    per_pair: Float[Tensor, "pair ..."]
    normalized: Float[Tensor, "*grid"]
    axes: tuple[str, ...]
    labels: dict[str, list[str]]
    kind: str
    direction: str
    base: Float[Tensor, " pair"]
    source: Float[Tensor, " pair"]
    method: str = "activation"

    @property
    def clean(self) -> Tensor:
        """Metric of the clean run per pair."""
        return self.source if self.direction == "denoise" else self.base

    @property
    def corrupt(self) -> Tensor:
        """Metric of the corrupted run per pair."""
        return self.base if self.direction == "denoise" else self.source

    def to_records(self) -> list[dict[str, Any]]:
        """One row per cell: axis labels (``layer``, ``pos``/``head``), ``value``, ``normalized``.

        ``value`` is the pair-mean metric of the patched run, ``normalized`` its normalised effect.
        """
        import itertools

        values, norm = self.values.tolist(), self.normalized.tolist()
        out = []
        for idx in itertools.product(*(range(len(self.labels[a])) for a in self.axes)):
            v, n = values, norm
            for i in idx:
                v, n = v[i], n[i]
            rec: dict[str, Any] = {a: self.labels[a][i] for a, i in zip(self.axes, idx)}
            rec.update(value=float(v), normalized=float(n))
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import largest_effect_table, patching_view

        view = patching_view(self, method=self.method)
        text = (f"{self.per_pair.shape[0]} prompt pairs, {self.method} patching of {self.kind} "
                f"({self.direction}); metric: clean {float(self.clean.mean()):.3f}, corrupt "
                f"{float(self.corrupt.mean()):.3f} (mean over pairs). Normalised effect = "
                "(m_patched - m_base) / (m_source - m_base).")
        return (Text(text=text), largest_effect_table([view.largest]), view.heatmap)

    def _summary(self) -> str:
        from .blocks import patching_view

        top = patching_view(self, method=self.method).largest
        shape = " x ".join(f"{len(self.labels[a])} {a}" for a in self.axes)
        return (f"{self.method} {self.kind} {self.direction}, {shape}; largest normalised effect "
                f"{top['effect']:.3f} at {top['cell']}")


@dataclass(frozen=True, kw_only=True)
class Grid:
    """Validated grid arguments: ``base`` runs are patched with ``source`` activations.

    Cell layer ``layers[i]`` patches the ``window`` consecutive blocks
    ``layers[i] .. min(layers[i] + window, n_layers) - 1`` (:meth:`window_of`).
    """

    base: list[list[int]]
    source: list[list[int]]
    kind: str
    by: tuple[str, ...]
    direction: str
    layers: list[int]
    window: int
    n_layers: int

    def window_of(self, layer: int) -> list[int]:
        """Blocks patched by the cell at ``layer``."""
        return list(range(layer, min(layer + self.window, self.n_layers)))

    @property
    def sites(self) -> list[Site]:
        """Every site some cell patches, in layer order."""
        layers = sorted({b for layer in self.layers for b in self.window_of(layer)})
        return [Site(b, self.kind) for b in layers]



@dataclass(frozen=True, kw_only=True)
class PatchOptions(Validated):
    """The options the patching family shares, built and validated once.

    :func:`~probekit.circuits.activation_patching`, :func:`~probekit.circuits.attribution_patching`
    and :func:`~probekit.circuits.patching_sweep` take one as ``options`` (or the same names as
    keywords, :meth:`build`): what is patched (``kind`` by ``by`` axes, in ``layers``, ``window``
    blocks per cell), which way (``direction``) and how it is batched (``batch_size``,
    ``padding_side``). Checks that need the model (layers in range, token ids) happen when a grid
    is prepared (:func:`prepare_grid`).

    Attributes:
        kind: activation kind patched (:data:`RESID_KINDS` by layer x position; the head kinds
            :data:`HEAD_PATCH_KINDS` by layer x head by default).
        by: grid axes, ``("layer", "pos")``, ``("layer", "head")`` or ``("layer", "pos",
            "head")``; ``None``: the kind's default.
        direction: ``"denoise"`` (clean activations into the corrupted run) or ``"noise"``.
        layers: the cells' layers (``None``: every block).
        window: blocks patched together per cell (``l .. l + window - 1``).
        batch_size: (pair, cell) rows per forward pass.
        padding_side: padding of the batched prompts.
    """

    kind: str = "resid_pre"
    by: tuple[str, ...] | None = None
    direction: Annotated[str, OneOf(("denoise", "noise"), hint="'denoise': clean into the "
                                    "corrupted run; 'noise': corrupted into the clean run")] = "denoise"
    layers: tuple[int, ...] | None = None
    window: Annotated[int, Ge(1, hint="blocks patched per cell")] = 1
    batch_size: Annotated[int, Ge(1, hint="(pair, cell) rows per forward")] = 64
    padding_side: Annotated[str, OneOf(("left", "right"))] = "right"
    #: ints are ints (``window=1.5``, ``layers=(True,)`` refused): the keyword calls are typed
    check_types: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """The declared rules (:class:`ConstraintError`), then kind, axes and layers (:class:`ConfigError`)."""
        super().__post_init__()
        kinds = RESID_KINDS + HEAD_PATCH_KINDS
        if self.kind not in kinds:
            raise ConfigError(f"patching kind {self.kind!r} not supported; use one of {list(kinds)}")
        if self.by is not None and (self.by not in BY_KINDS or self.kind not in BY_KINDS[self.by]):
            valid = [list(b) for b, fits in BY_KINDS.items() if self.kind in fits]
            raise ConfigError(f"by={list(self.by)} does not fit kind {self.kind!r}; use one of "
                              f"{valid} (or leave by unset for the kind's default)")
        if self.layers is not None:
            try:
                check_list_option("layers", self.layers, low=0, what="block index")
            except ConfigError as err:
                raise KeyedValueError("layers", str(err)) from None

    @classmethod
    def build(cls, options: PatchOptions | None = None, /, **keywords: Any) -> PatchOptions:
        """``options`` (default: all defaults) with ``keywords`` replacing fields.

        Sequences are accepted for ``by`` and ``layers`` (stored as tuples), so the keyword
        calls ``activation_patching(..., kind="attn_z", layers=[0, 1])`` keep working.

        Raises:
            ConfigError: an unknown keyword (naming the closest field), or a bad value.
        """
        import difflib
        from dataclasses import fields, replace

        names = [f.name for f in fields(cls)]
        unknown = [k for k in keywords if k not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown patching option {unknown[0]!r}; {hint}options are {names}")
        for key in ("by", "layers"):
            if keywords.get(key) is not None:
                keywords[key] = tuple(keywords[key])
        return replace(options, **keywords) if options is not None else cls(**keywords)

    def resolved_by(self) -> tuple[str, ...]:
        """``by``, or the kind's default axes: ``(layer, head)`` for head kinds, else ``(layer, pos)``."""
        if self.by is not None:
            return self.by
        return ("layer", "head") if self.kind in HEAD_KINDS else ("layer", "pos")


def as_token_lists(tokens: Tensor | Sequence[Sequence[int]], what: str) -> list[list[int]]:
    """Token ids as lists; a 2-D tensor is one prompt per row."""
    if isinstance(tokens, Tensor):
        if tokens.ndim != 2:
            raise DataError(f"{what} must be (pair, pos), got shape {tuple(tokens.shape)}")
        if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
            raise DataError(f"{what} has dtype {tokens.dtype}; token ids must be integers "
                            "(torch.long)")
        return tokens.tolist()
    out = []
    for i, t in enumerate(tokens):
        bad = [v for v in t if isinstance(v, bool) or not float(v).is_integer()]
        if bad:
            raise DataError(f"{what}[{i}] holds {bad[0]!r}; token ids must be integers")
        out.append([int(v) for v in t])
    if not out or min(len(t) for t in out) == 0:
        raise DataError(f"{what} is empty or holds an empty prompt; give >= 1 token per prompt")
    return out


def check_pairs(clean: list[list[int]], corrupt: list[list[int]]) -> None:
    """Clean and corrupted prompts pair up one to one with equal lengths (positions correspond)."""
    if len(clean) != len(corrupt):
        raise DataError(
            f"{len(clean)} clean prompts but {len(corrupt)} corrupted prompts; give one corrupted "
            "prompt per clean prompt"
        )
    for i, (c, r) in enumerate(zip(clean, corrupt)):
        if len(c) != len(r):
            raise DataError(
                f"pair {i}: clean prompt has {len(c)} tokens but corrupted has {len(r)}; a "
                "position grid needs equal lengths: rephrase or pad the shorter prompt"
            )


def check_token_limits(model: HookedModel, prompts: list[list[int]], what: str) -> None:
    """Token ids inside the model's vocabulary and prompts within its context."""
    from ..inputs import check_vocab

    check_vocab(prompts, int(model.cfg.d_vocab), [f"{what}[{i}]" for i in range(len(prompts))])
    n_ctx = int(model.cfg.n_ctx)
    for i, p in enumerate(prompts):
        if len(p) > n_ctx:
            raise DataError(f"{what}[{i}] has {len(p)} tokens but the model's context is {n_ctx}; "
                            "shorten the prompt")


def check_layers(model: HookedModel, layers: Sequence[int] | None) -> list[int]:
    """``layers`` (default: every block): distinct ints within the model's blocks.

    The list-option rule (:func:`probekit.util.list_option.check_list_option`): a block given
    twice would patch and report the same cells twice.
    """
    n_layers = int(model.cfg.n_layers)
    if layers is None:
        return list(range(n_layers))
    return check_list_option("layers", [int(x) for x in layers], low=0, high=n_layers,
                             what="block index", note=f"the model has {n_layers} blocks")


def check_window(window: int, n_layers: int) -> int:
    """``window`` within ``1 .. n_layers``: a longer window would be clipped to the model silently.

    Raises:
        ConfigError: ``window = 100 exceeds the model's 1 block(s); give window in 1..1``.
    """
    if window > n_layers:
        raise ConfigError(f"window = {window} exceeds the model's {n_layers} block(s) (a cell "
                          f"patches at most every block); give window in 1..{n_layers}")
    return window


def prepare_grid(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    options: PatchOptions,
) -> Grid:
    """Validate the prompts and ``options`` against the model (one error naming the value and the fix)."""
    clean = as_token_lists(clean_tokens, "clean_tokens")
    corrupt = as_token_lists(corrupt_tokens, "corrupt_tokens")
    check_pairs(clean, corrupt)
    check_token_limits(model, clean, "clean_tokens")
    check_token_limits(model, corrupt, "corrupt_tokens")
    base, source = (corrupt, clean) if options.direction == "denoise" else (clean, corrupt)
    return Grid(base=base, source=source, kind=options.kind, by=options.resolved_by(),
                direction=options.direction, layers=check_layers(model, options.layers),
                window=check_window(options.window, int(model.cfg.n_layers)),
                n_layers=int(model.cfg.n_layers))


def run_metric(metric: Metric, last_logits: Tensor, pair: Tensor) -> Tensor:
    """Apply ``metric`` to last-token logits ``(row, d_vocab)``; check one finite value per row.

    Raises:
        DataError: the metric returned the wrong shape.
        NonFiniteError: it returned NaN or inf (naming the pairs and whether the logits were).
    """
    value = as_pair_metric(metric)(last_logits, pair)
    n = last_logits.shape[0]
    if not isinstance(value, Tensor) or value.shape != (n,):
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise DataError(
            f"metric returned {shape}, expected one value per prompt ({n},): "
            "metrics map (row, d_vocab) last-token logits and (row,) pair indices to (row,)"
        )
    bad = ~torch.isfinite(value.detach())
    if bool(bad.any()):
        rows = torch.nonzero(bad).flatten().cpu()
        pairs = sorted({int(p) for p in pair.cpu()[rows].tolist()})
        logits_ok = bool(torch.isfinite(last_logits[rows]).all())
        cause = ("the logits are finite, so the metric made it (e.g. log of 0, 0/0)" if logits_ok
                 else "the model's logits are already non-finite there (check dtype / weights)")
        raise NonFiniteError(
            f"patching metric returned {value[rows[0]].item()} for {len(rows)} of {n} rows "
            f"(pairs {pairs[:5]}{' ...' if len(pairs) > 5 else ''}); {cause}; a patching "
            "metric must be finite for every pair"
        )
    return value.detach().float()


def token_labels(model: HookedModel, tokens: list[int]) -> list[str]:
    """``"t:token"`` labels for a position axis (token strings when a tokenizer is present)."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return [f"{t}:{i}" for t, i in enumerate(tokens)]
    return [f"{t}:{tok.decode([i])}" for t, i in enumerate(tokens)]


def grid_shape(model: HookedModel, grid: Grid) -> tuple[int, ...]:
    """Sizes of the grid's axes (``pos``: the longest prompt; ``head``: the kind's heads)."""
    size = {"layer": len(grid.layers), "pos": max(len(t) for t in grid.base),
            "head": Site(0, grid.kind).n_heads(model) if grid.kind in HEAD_KINDS else 0}
    return tuple(size[a] for a in grid.by)


def grid_result(
    model: HookedModel,
    grid: Grid,
    per_pair: Float[Tensor, "pair ..."],
    m_base: Float[Tensor, " pair"],
    m_source: Float[Tensor, " pair"],
    method: str = "activation",
) -> PatchingResult:
    """Pair mean (NaN cells skipped), normalised effect and labelled axes of ``per_pair``."""
    m_base, m_source = m_base.cpu(), m_source.cpu()
    values = per_pair.nanmean(0)
    gap = m_source.mean() - m_base.mean()
    if not bool(gap != 0):
        import warnings

        warnings.warn(
            f"{grid.kind} patching: the clean and corrupted runs give the same mean metric "
            f"({float(m_base.mean()):.4g}), so the normalised effect (m_patched - m_base) / "
            "(m_source - m_base) is 0/0 and every normalized cell is NaN; use prompt pairs whose "
            "metric differs (different prompts, different answers)",
            stacklevel=3,
        )
    normalized = (values - m_base.mean()) / gap
    n_pos = max(len(t) for t in grid.base)
    layer_labels = [str(x) if grid.window_of(x)[-1] == x else f"{x}-{grid.window_of(x)[-1]}"
                    for x in grid.layers]
    n_heads = Site(0, grid.kind).n_heads(model) if grid.kind in HEAD_KINDS else 0
    labels = {"layer": layer_labels,
              "pos": token_labels(model, grid.base[0]) if len(set(map(tuple, grid.base))) == 1
              else [str(t) for t in range(n_pos)],
              "head": [str(h) for h in range(n_heads)]}
    return PatchingResult(
        values=values, per_pair=per_pair, normalized=normalized, axes=grid.by,
        labels={a: labels[a] for a in grid.by}, kind=grid.kind, direction=grid.direction,
        base=m_base, source=m_source, method=method,
    )
