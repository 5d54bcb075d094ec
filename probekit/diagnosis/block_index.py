"""Block indices of a marker resolved against each checkpoint's depth (populations of depths).

A population whose models differ in depth (``model.n_layers``, [C]'s depth sweep; An & Du 2026)
names "the last block" once for all of them: a negative block index counts from the end, as in
Python, per checkpoint. ``layer = -1`` and ``site = "resid_post@-1"`` are block ``n_layers - 1``
of each model (block 3 of a 4-block model, block 0 of a 1-block one); ``-2`` the one before.

A block the model does not have (``resid_post@3`` on a 2-block model, ``@-3`` on a 2-block one)
makes the marker not applicable to that checkpoint (:class:`~probekit.errors.NotApplicableError`,
an explicit empty cell with this reason), never a crash or a NaN; a block index that no model of
the population has is refused up front by ``probekit diagnose --check``
(:func:`check_block_indices`).

Keys resolved: ``layer`` (an int), ``layers`` (ints), and the ``KIND@LAYER[:HEAD]`` site strings
``site``, ``sites``, ``site_a``, ``site_b`` (``site_b`` against the reference checkpoint's depth
when the marker reads it on a reference).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ConfigError, NotApplicableError
from ..sites import parse_block_text

__all__ = ["block_indices", "check_block_indices", "resolve_block", "resolve_blocks"]

_SITE_KEYS = ("site", "sites", "site_a", "site_b")


def resolve_block(index: int, n_layers: int, *, what: str) -> int:
    """Block ``index`` of a model of ``n_layers`` blocks (``-1``: the last).

    Raises:
        NotApplicableError: the model has no such block (naming ``what``, the depth and the range).
    """
    block = index + n_layers if index < 0 else index
    if not 0 <= block < n_layers:
        raise NotApplicableError(
            f"{what}: block {index} does not exist in this {n_layers}-block model (blocks 0.."
            f"{n_layers - 1}, or -{n_layers}..-1 from the end); the marker is not applicable to it")
    return block


def _site(text: str, n_layers: int, key: str) -> str:
    parsed = parse_block_text(text)
    if parsed is None:
        return text  # a model-level site or another spelling: the kind validates it
    kind, layer, head = parsed
    block = resolve_block(layer, n_layers, what=f"{key} = {text!r}")
    return f"{kind}@{block}" + ("" if head is None else f":{head}")


def resolve_blocks(spec: Any, n_layers: int, *, reference_layers: int | None = None) -> Any:
    """``spec`` (a measurement kind's spec dataclass) with its block indices resolved.

    Args:
        spec: the kind's spec (its ``layer``, ``layers`` and site keys are resolved).
        n_layers: the checkpoint's number of blocks.
        reference_layers: the reference checkpoint's (``site_b`` is read there), or ``None``.

    Returns:
        A copy with every block index in ``0..n_layers - 1`` (the same object when nothing
        changes).

    Raises:
        NotApplicableError: a block the model does not have.
    """
    changes: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(spec)}
    for key in names & {"layer", "layers", *_SITE_KEYS}:
        value = getattr(spec, key)
        depth = reference_layers if key == "site_b" and reference_layers is not None else n_layers
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            new: Any = resolve_block(value, depth, what=f"{key} = {value}")
        elif isinstance(value, str):
            new = value if key not in _SITE_KEYS or value == "all" else _site(value, depth, key)
        elif isinstance(value, (list, tuple)):
            new = type(value)(
                resolve_block(v, depth, what=f"{key} = {v}") if isinstance(v, int)
                and not isinstance(v, bool) else _site(v, depth, key) if isinstance(v, str)
                else v for v in value)
        else:
            continue
        if new != value:
            changes[key] = new
    return dataclasses.replace(spec, **changes) if changes else spec


def block_indices(spec: Any) -> list[tuple[str, int]]:
    """``(key = value, block index)`` of every block a spec names (negative ones included)."""
    out: list[tuple[str, int]] = []
    names = {f.name for f in dataclasses.fields(spec)}
    for key in sorted(names & {"layer", "layers", *_SITE_KEYS}):
        value = getattr(spec, key)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                out.append((f"{key} = {v}", v))
            elif isinstance(v, str) and key in _SITE_KEYS and (
                    parsed := parse_block_text(v)) is not None:
                out.append((f"{key} = {v!r}", parsed[1]))
    return out


def check_block_indices(markers: Any, depths: list[int], where: Any) -> None:
    """Every block a marker names exists in at least one model of the population.

    Args:
        markers: the file's :class:`~probekit.diagnosis.spec.MarkerSpec` s.
        depths: ``n_layers`` of each model of the population.
        where: ``where(section, key, index) -> "FILE:LINE: [section] key"``.

    Raises:
        ConfigError: a block index no model has (naming the marker, the index and the depths).
    """
    if not depths:
        return
    lo, hi = min(depths), max(depths)
    for i, m in enumerate(markers):
        for text, index in block_indices(m.spec):
            if not -hi <= index < hi:
                key = text.split(" = ")[0]
                raise ConfigError(
                    f"{where('marker', key, i)}: marker {m.name!r} {text}: no model of the "
                    f"population has that block (depths {lo}..{hi}: blocks 0..{hi - 1}, or "
                    f"-{hi}..-1 counted from the last); use a block they have, e.g. -1 for the last")
