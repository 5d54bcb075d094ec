"""Command-line flags generated from a config dataclass: one declaration per option.

A command that exposes a method's options does not copy them as argparse calls: it names the
fields of the method's frozen config and :func:`add_config_flags` adds one flag per field,
``field_name`` -> ``--field-name``, with the field's default, its ``Literal`` choices, its type
and a help text made of the class docstring's ``Attributes:`` entry, the declared rule
(:mod:`probekit.util.constraints`) and the default. :func:`config_from_flags` builds the config
back from the parsed arguments; a value that breaks a declared rule is a one-line
:class:`~probekit.errors.ConfigError` naming the flag as it was typed (``--window 0: must be
>= 1``). So the TOML key, the Python keyword and the flag share their default and their bound,
and ``tests/test_spec_checks.py`` checks that every parser keeps them equal.

Flag shapes: ``bool`` -> ``--flag`` / ``--no-flag`` (``store_true`` when the default is
``False``); ``Literal`` -> ``choices``; ``tuple[T, ...]`` -> a comma-separated list (``--layers
0,1,2``; checked by :func:`~probekit.util.list_option.check_list_option` with the lower bound of
the field's ``Each(Ge(...))`` rule, so a repeat or a value below it names the flag); ``T | None``
-> ``T`` with default ``None``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from .constraints import Constraint, ConstraintError, Each, Ge, constraints_of

__all__ = ["ListFlag", "add_config_flags", "config_from_flags", "field_docs", "flag_name",
           "flag_fields"]

#: ``parser.set_defaults`` key holding ``{dest: (config class, field)}`` of the generated flags
_REGISTRY = "_config_flags"


@dataclass(frozen=True)
class ListFlag:
    """How a ``tuple`` field reads as a comma-separated flag.

    Attributes:
        what: one value in words, for messages (``"block index"``).
        example: what a bad list is told to look like (``"block indices like 0,1,2"``).
    """

    what: str = "value"
    example: str = "values like a,b"


def flag_name(field: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")


def field_docs(cls: type) -> dict[str, str]:
    """``{field: text}`` of the google-style ``Attributes:`` section of ``cls``'s docstring.

    An entry may name several fields (``pair_column, role_column: ...``); continuation lines
    are joined; base classes' entries count, the subclass's win. Fields without an entry are
    absent.
    """
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        out.update(_own_field_docs(klass))
    return out


def _own_field_docs(cls: type) -> dict[str, str]:
    """:func:`field_docs` of ``cls``'s own docstring."""
    doc = cls.__dict__.get("__doc__") or ""
    lines = doc.splitlines()
    out: dict[str, str] = {}
    try:
        start = next(i for i, t in enumerate(lines) if t.strip() == "Attributes:")
    except StopIteration:
        return out
    names: list[str] = []
    indent = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        indent = width if indent is None else indent
        if width < indent:
            break
        head = re.match(r"\s*([\w ,/]+?):\s(.*)", line) if width == indent else None
        if head:
            names = [n for n in re.split(r"[ ,/]+", head.group(1)) if n]
            for n in names:
                out[n] = head.group(2).strip()
        else:
            for n in names:
                out[n] += " " + line.strip()
    return out


def _element(annotation: Any) -> tuple[Any, bool, bool]:
    """``(scalar type, optional, is_list)`` of a field annotation (constraints stripped)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    inner = args[0] if optional and len(args) == 1 else annotation
    if typing.get_origin(inner) is tuple:
        return typing.get_args(inner)[0], optional, True
    return inner, optional, False


def _scalar_type(annotation: Any) -> Any:
    if typing.get_origin(annotation) is Literal:
        return type(typing.get_args(annotation)[0])
    return annotation if annotation in (int, float, str) else str


def _list_low(rules: Iterable[Constraint]) -> int | None:
    for rule in rules:
        if isinstance(rule, Each) and isinstance(rule.inner, Ge) and isinstance(rule.inner.bound, int):
            return rule.inner.bound
    return None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) if value else "(none)"
    return str(value)


def flag_fields(parser: argparse.ArgumentParser) -> dict[str, tuple[type, str]]:
    """``{dest: (config class, field)}`` of the flags :func:`add_config_flags` added to ``parser``."""
    return dict(parser.get_default(_REGISTRY) or {})


def add_config_flags(
    parser: argparse.ArgumentParser, cls: type, fields: Iterable[str], *,
    help: Mapping[str, str] | None = None,
) -> None:
    """Add one flag per named field of the config dataclass ``cls`` to ``parser``.

    Args:
        parser: the command's parser.
        cls: a frozen config dataclass whose rules are declared (:mod:`probekit.util.constraints`).
        fields: the fields to expose, in the order of the help.
        help: a help text per field that replaces the docstring's (e.g. a CLI-only remark).
    """
    rules = constraints_of(cls)
    docs = {**field_docs(cls), **(help or {})}
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    seen = flag_fields(parser)
    for name in fields:
        f = defaults[name]
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            raise ConfigError(f"{cls.__name__}.{name} has no default, so it cannot be a flag; "
                              "make it a positional argument")
        annotation, found = rules[name]
        scalar, _, is_list = _element(annotation)
        words = [docs.get(name, "").rstrip(".")]
        words += [f"must be {r.rule}" for r in found]
        kwargs: dict[str, Any] = {"dest": name, "default": default}
        if scalar is bool and not is_list:
            kwargs["action"] = "store_true" if default is False else argparse.BooleanOptionalAction
        else:
            words.append(f"default {_shown(default)}")
            if typing.get_origin(scalar) is Literal and not is_list:
                kwargs["choices"] = list(typing.get_args(scalar))
            kwargs["type"] = str if is_list else _scalar_type(scalar)
        kwargs["help"] = "; ".join(w for w in words if w).replace("``", "").replace("%", "%%")
        parser.add_argument(flag_name(name), **kwargs)
        seen[name] = (cls, name)
    parser.set_defaults(**{_REGISTRY: seen})


def _parse_list(flag: str, value: Any, scalar: Any, form: ListFlag) -> Any:
    if not isinstance(value, str):
        return value  # the default, already a tuple
    parts = [p.strip() for p in value.split(",") if p.strip()]
    kind = _scalar_type(scalar)
    try:
        return tuple(kind(p) for p in parts)
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected comma-separated {form.example}") from None


def config_from_flags(
    args: argparse.Namespace, cls: type, fields: Iterable[str], *,
    lists: Mapping[str, ListFlag] | None = None, **values: Any,
) -> Any:
    """``cls(**{field: args.field}, **values)``; a broken rule names the flag (``ConfigError``).

    ``lists`` gives the words of each list flag's messages. ``values`` are further fields set
    by the command itself.
    """
    from .list_option import check_list_option

    rules = constraints_of(cls)
    kwargs: dict[str, Any] = {}
    for name in fields:
        value = getattr(args, name)
        annotation, found = rules[name]
        scalar, _, is_list = _element(annotation)
        if is_list:
            form = (lists or {}).get(name, ListFlag())
            value = _parse_list(flag_name(name), value, scalar, form)
            check_list_option(flag_name(name), value, low=_list_low(found), what=form.what)
        kwargs[name] = value
    try:
        return cls(**kwargs, **values)
    except ConstraintError as err:  # a declared rule: name the option as it was typed
        shown = ",".join(map(str, err.value)) if isinstance(err.value, tuple) else err.value
        raise ConfigError(f"{flag_name(err.key)} {shown!r}: must be {err.rule}") from None
