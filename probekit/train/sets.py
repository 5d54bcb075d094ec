"""``--set SECTION.KEY=VALUE`` overrides, parsed against the config dataclasses they set.

One parser for every surface that takes ``--set`` items (``probekit train`` of a testbed preset,
:func:`probekit.train.build.build_run`: sections ``task`` / ``model`` / ``train``; a fine-tune
preset, :func:`probekit.train.finetune_presets.build_finetune`: ``train`` and, with a testbed,
``task``; a diagnosis grid, whose keys become such items). Each surface passes its sections as
``{section: config class}``; an item names its section (``train.lr=1e-3``) or leaves it out when
exactly one section has the key (``lr=1e-3``). The value is JSON when it parses (lists become
tuples), else the raw string, and is checked at once against the field's declared type and rules
(:func:`probekit.util.constraints.check_value`), so a bad item is refused with the line the
config itself would give, prefixed with the item.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from ..errors import ConfigError
from ..util.config import close_match_hint
from ..util.constraints import ConstraintError, check_value

__all__ = ["parse_sets", "parse_value"]


def parse_value(text: str) -> Any:
    """JSON if it parses (lists become tuples), else the raw string.

    Only parsing: whether the value suits its field (type, bounds, ``1e400`` = inf) is decided by
    the field's declared constraints (:func:`parse_sets`, and the config when it is built).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return _tuplify(value)


def _tuplify(v: Any) -> Any:
    return tuple(_tuplify(x) for x in v) if isinstance(v, list) else v


def as_float(value: Any, annotation: Any) -> Any:
    """An int given for a ``float`` field (``train.lr=1``) as a float, also inside tuples."""
    if isinstance(value, int) and not isinstance(value, bool):
        options = (typing.get_args(annotation)
                   if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,))
        return float(value) if float in options and int not in options else value
    if isinstance(value, tuple) and typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        inner = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        return tuple(as_float(v, a) for v, a in zip(value, inner))
    return value


def parse_sets(items: list[str], sections: dict[str, type], *,
               what: str | None = None) -> dict[str, dict[str, Any]]:
    """``["task.p=97", "lr=3e-3"]`` -> ``{"task": {"p": 97}, "model": {}, "train": {"lr": 0.003}}``.

    Args:
        items: ``SECTION.KEY=VALUE`` or ``KEY=VALUE`` (``KEY`` in exactly one section).
        sections: section -> the config dataclass its keys are fields of (in the order errors
            list them).
        what: how errors name the surface (default: ``"the <sections> configs"``), e.g.
            ``"this fine-tune preset"``.

    Returns:
        section -> {field: value} for every section (empty when no item sets it).

    Raises:
        ConfigError: ``--set 'ITEM': ...`` for an item that is not ``key=value``, an unknown
            section or key (with the valid ones and a close match), a key in several sections
            given without one, or ``--set ITEM: Class.key must be ...`` for a value its field's
            declared type or rules refuse.
    """
    scopes = tuple(sections)
    what = what or f"the {', '.join(scopes)} configs"
    fields = {s: [f.name for f in dataclasses.fields(c) if f.init] for s, c in sections.items()}
    example = next((f"{s}.lr=3e-3" for s in scopes if "lr" in fields[s]),
                   f"{scopes[0]}.{fields[scopes[0]][0]}=VALUE")
    every = ", ".join(f"{s}.<{' | '.join(sorted(fields[s]))}>" for s in scopes)
    out: dict[str, dict[str, Any]] = {s: {} for s in scopes}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r} is not key=value (e.g. --set {example})")
        scope, dot, name = key.partition(".")
        if dot:
            if scope not in sections:
                raise ConfigError(f"--set {item!r}: not a key of {what}: prefix {scope!r} must be "
                                  f"one of {scopes}{close_match_hint(scope, scopes)}; valid keys "
                                  f"are {every}")
            if name not in fields[scope]:
                raise ConfigError(
                    f"--set {item!r}: not a key of {what}: the {scope} config has no field "
                    f"{name!r}{close_match_hint(name, fields[scope])}; valid: {sorted(fields[scope])}")
        else:
            name = key
            owners = [s for s in scopes if name in fields[s]]
            if not owners:
                hint = close_match_hint(name, [k for s in scopes for k in fields[s]])
                raise ConfigError(f"--set {item!r}: not a key of {what}: field {name!r} belongs to "
                                  f"no config{hint}; valid keys are {every}")
            if len(owners) > 1:
                raise ConfigError(
                    f"--set {item!r}: field {name!r} belongs to configs {owners}; write it as "
                    f"<scope>.{name}=... with scope in {tuple(owners)}")
            scope = owners[0]
        cls = sections[scope]
        value = as_float(parse_value(raw), typing.get_type_hints(cls)[name])
        try:  # the field's declared type and rules, the line the config itself would give
            check_value(cls, name, value, types=True)
        except ConstraintError as err:
            raise ConfigError(f"--set {item}: {err}") from None
        out[scope][name] = value
    return out
