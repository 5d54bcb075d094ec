"""Declarative field constraints for frozen config dataclasses, and the one validator reading them.

A method package declares its options once, as a frozen keyword-only dataclass whose fields
carry their rules in ``Annotated`` metadata::

    @dataclass(frozen=True, kw_only=True)
    class HEConfig(Validated):
        train_fraction: Annotated[float, Between(0, 1)] = 0.8
        n_resamples: Annotated[int, Ge(1000)] = 1000
        families: Annotated[tuple[Family, ...], NonEmpty()] = FAMILIES

:func:`validate` (run by :class:`Validated`'s ``__post_init__``) checks every field against its
``Literal`` choices and its constraints and raises :class:`ConstraintError` naming the class,
the field, the rule and the value (``HEConfig.train_fraction must be in (0, 1), got 1.5``). The
suite, claim and diagnosis files build the same classes (or subclasses that add their own
keys) through :func:`probekit.suites.spec.build_table`, which checks the TOML types and unknown
keys and turns a :class:`ConstraintError` into the ``FILE:LINE: [section] key = value: must be
...`` message of the key's own line. So an option is declared, documented and validated in one
place and every surface that reuses the class accepts it.

Why our own vocabulary and not pydantic or attrs: the rules probekit needs are a handful of
bounds and choices on scalars and tuples; the configs are plain frozen dataclasses that the
registries, ``dataclasses.replace`` / ``asdict`` and beartype already understand, and the error
messages must point at TOML lines, which neither library knows. pydantic would add a compiled
dependency and a second model system beside the dataclasses; attrs validators would replace
``dataclasses`` everywhere. The vocabulary here is ~150 lines with no dependency.

A field with ``init=False`` is not a key of the file: a subclass redeclares a base option that
its surface sets itself (e.g. a claim's bootstrap comes from ``[stats]``) that way
(:func:`keys_of`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..errors import KeyedValueError

__all__ = [
    "SEED",
    "Between",
    "Constraint",
    "ConstraintError",
    "Distinct",
    "Each",
    "Finite",
    "Ge",
    "Gt",
    "KeyedValueError",
    "Le",
    "Lt",
    "NonEmpty",
    "OneOf",
    "Validated",
    "base_config",
    "check_value",
    "conforms",
    "constraints_of",
    "keys_of",
    "type_words",
    "validate",
]


class ConstraintError(KeyedValueError):
    """A field's value breaks its declared rule; ``owner``, ``key``, ``value``, ``rule`` say which.

    A :class:`~probekit.errors.KeyedValueError`: a config's own ``__post_init__`` check that is
    not a declared rule raises that class with the offending ``key`` (and its own message).
    """

    def __init__(self, owner: str, key: str, value: Any, rule: str) -> None:
        """Hold the parts; the message is ``OWNER.KEY must be RULE, got VALUE``."""
        self.owner, self.value, self.rule = owner, value, rule
        super().__init__(key, f"{owner}.{key} must be {rule}, got {value!r}")

    def __reduce__(self) -> tuple[type, tuple[str, str, Any, str]]:  # type: ignore[override]
        """Pickle as its parts (``KeyedValueError``'s form has two)."""
        return type(self), (self.owner, self.key, self.value, self.rule)


@dataclass(frozen=True)
class Constraint:
    """A rule on one value; subclasses define :meth:`ok` and :attr:`rule` (text after "must be")."""

    hint: str = dataclasses.field(default="", kw_only=True)

    def ok(self, value: Any) -> bool:  # pragma: no cover - abstract
        """Whether ``value`` satisfies the rule."""
        raise NotImplementedError

    @property
    def text(self) -> str:  # pragma: no cover - abstract
        """The rule in words, e.g. ``">= 1"``, ``"in (0, 1)"``."""
        raise NotImplementedError

    @property
    def rule(self) -> str:
        """:attr:`text` with the hint, e.g. ``">= 5 (19 for p < 0.05)"``."""
        return f"{self.text} ({self.hint})" if self.hint else self.text


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(bound: int | float) -> str:
    """A bound in a message: an int in full (``4294967296``), a float by ``:g``."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


@dataclass(frozen=True)
class _Compare(Constraint):
    """``value <op> bound`` for the subclass's ``op`` (a NaN fails every comparison)."""

    bound: int | float
    symbol: ClassVar[str] = ""
    op: ClassVar[Callable[[Any, Any], bool]] = operator.eq

    def ok(self, value: Any) -> bool:
        """``value <op> bound``."""
        return _number(value) and bool(type(self).op(value, self.bound))

    @property
    def text(self) -> str:
        """``"<op> bound"``, e.g. ``">= 1"``."""
        return f"{self.symbol} {_shown(self.bound)}"


class Ge(_Compare):
    """``value >= bound``."""

    symbol, op = ">=", operator.ge


class Gt(_Compare):
    """``value > bound``."""

    symbol, op = ">", operator.gt


class Le(_Compare):
    """``value <= bound``."""

    symbol, op = "<=", operator.le


class Lt(_Compare):
    """``value < bound``."""

    symbol, op = "<", operator.lt


@dataclass(frozen=True)
class Between(Constraint):
    """``low < value < high`` (open; ``closed="right"`` for ``(low, high]``, ``"both"``, ``"left"``)."""

    low: int | float
    high: int | float
    closed: Literal["neither", "left", "right", "both"] = "neither"

    def ok(self, value: Any) -> bool:
        """Inside the interval (a NaN is not)."""
        if not _number(value):
            return False
        lo = value >= self.low if self.closed in ("left", "both") else value > self.low
        hi = value <= self.high if self.closed in ("right", "both") else value < self.high
        return bool(lo and hi)

    @property
    def text(self) -> str:
        """``"in (0, 1)"``, ``"in (0, 1]"`` ..."""
        left = "[" if self.closed in ("left", "both") else "("
        right = "]" if self.closed in ("right", "both") else ")"
        return f"in {left}{_shown(self.low)}, {_shown(self.high)}{right}"


@dataclass(frozen=True)
class Finite(Constraint):
    """A finite number (TOML and Python allow ``nan`` and ``inf``; no estimator can use them)."""

    def ok(self, value: Any) -> bool:
        """``math.isfinite(value)``."""
        return _number(value) and math.isfinite(value)

    @property
    def text(self) -> str:
        """``"a finite number"``."""
        return "a finite number"


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of the given values, for a field typed ``str``.

    A ``Literal`` field lists its choices itself; ``OneOf`` keeps the plain type for callers that
    type-check a constructor's arguments (beartype), so the rule's own message is the one seen.
    """

    choices: tuple[Any, ...]

    def ok(self, value: Any) -> bool:
        """``value in choices``."""
        return value in self.choices

    @property
    def text(self) -> str:
        """``"one of ['a', 'b']"``."""
        return f"one of {list(self.choices)}"


@dataclass(frozen=True)
class NonEmpty(Constraint):
    """A non-empty tuple / string."""

    def ok(self, value: Any) -> bool:
        """``len(value) > 0``."""
        return len(value) > 0

    @property
    def text(self) -> str:
        """``"non-empty"``."""
        return "non-empty"


@dataclass(frozen=True)
class Distinct(Constraint):
    """A tuple whose values are each given once (:func:`probekit.util.list_option.repeated`)."""

    def ok(self, value: Any) -> bool:
        """No value repeats."""
        from .list_option import repeated

        return not repeated(value)

    @property
    def text(self) -> str:
        """``"distinct (each value once)"``."""
        return "distinct (each value once)"


@dataclass(frozen=True)
class Each(Constraint):
    """Every element of a tuple satisfies ``inner`` (e.g. ``Each(Between(0, 1, closed="right"))``)."""

    inner: Constraint

    def ok(self, value: Any) -> bool:
        """``inner`` holds for every element."""
        return all(self.inner.ok(v) for v in value)

    @property
    def text(self) -> str:
        """``"all in (0, 1]"``."""
        return f"all {self.inner.rule}"


#: the rule of a config's ``seed`` (task, model and train configs, like ``probekit train --seed``):
#: an int in [0, 2**32), which numpy's and torch's generators both take
SEED = Between(0, 2**32, closed="left")


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    """``(T, True)`` for ``T | None``; ``(annotation, False)`` otherwise."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True  # noqa: UP007
    return annotation, False


def constraints_of(cls: type) -> dict[str, tuple[Any, tuple[Constraint, ...]]]:
    """``{field: (type without Annotated, constraints)}`` of a dataclass, base classes included."""
    return dict(_constraints_of(cls))


@functools.cache
def _constraints_of(cls: type) -> dict[str, tuple[Any, tuple[Constraint, ...]]]:
    """:func:`constraints_of`, computed once per class.

    ``typing.get_type_hints`` evaluates every string annotation anew on each call, and
    :func:`validate` runs on every config built (once per field before this cache).
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[Any, tuple[Constraint, ...]]] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        found: list[Constraint] = []
        while typing.get_origin(hint) is typing.Annotated:  # also inside ``X | None``
            found += [m for m in hint.__metadata__ if isinstance(m, Constraint)]
            hint = typing.get_args(hint)[0]
        inner, optional = _strip_optional(hint)
        while typing.get_origin(inner) is typing.Annotated:
            found += [m for m in inner.__metadata__ if isinstance(m, Constraint)]
            inner = typing.get_args(inner)[0]
        out[f.name] = (inner | None if optional else inner, tuple(found))
    return out


def _choices(annotation: Any) -> tuple[tuple[Any, ...], bool] | None:
    """``(choices, per_element)`` of a ``Literal`` field or a ``tuple[Literal, ...]`` field."""
    inner, _ = _strip_optional(annotation)
    if typing.get_origin(inner) is Literal:
        return typing.get_args(inner), False
    if typing.get_origin(inner) is tuple:
        args = typing.get_args(inner)
        if args and typing.get_origin(args[0]) is Literal:
            return typing.get_args(args[0]), True
    return None


def conforms(value: Any, annotation: Any) -> bool:
    """Whether ``value`` has the declared type (an int is a float, a bool is no int).

    ``Literal`` values, ``X | None``, ``tuple[T, ...]`` and fixed tuples are checked element by
    element; other generics (``dict[...]``) and ``Any`` pass (left to the owner's own checks).
    """
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in typing.get_args(annotation))
    if origin is Literal:
        return value in typing.get_args(annotation)
    if origin is typing.Annotated:
        return conforms(value, typing.get_args(annotation)[0])
    if origin is tuple:
        args = typing.get_args(annotation)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(args) == len(value) and all(conforms(v, a) for v, a in zip(value, args))
    if origin is not None:
        return True
    if annotation is type(None):
        return value is None
    if annotation is float:
        return _number(value)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation) if isinstance(annotation, type) else True


def type_words(annotation: Any) -> str:
    """``an int``, ``an int or None``, ``a tuple[int, ...]`` ... for messages."""
    words = {int: "an int", float: "a number", str: "a string", bool: "true or false",
             type(None): "None"}
    if annotation in words:
        return words[annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(type_words(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is Literal:
        return "one of " + str(list(typing.get_args(annotation)))
    return "a " + str(annotation).replace("typing.", "").replace("NoneType", "None")


def check_value(cls: type, key: str, value: Any, *, types: bool | None = None) -> None:
    """Check one value of the field ``key`` of the dataclass ``cls`` against its declared rules.

    The rules :func:`validate` applies to that field, for a value not yet in an instance: a
    surface that collects values one at a time (``probekit train --set``, a diagnosis grid)
    refuses the bad one with the line :func:`validate` would give. ``types``: check the type
    too (default: the class's ``check_types``).
    """
    annotation, rules = _constraints_of(cls)[key]
    owner = cls.__name__
    strict = bool(getattr(cls, "check_types", False)) if types is None else types
    if strict and not conforms(value, annotation):
        raise ConstraintError(owner, key, value, type_words(annotation))
    if value is None:
        return
    choices = _choices(annotation)
    if choices is not None:
        allowed, per_element = choices
        values = value if per_element else (value,)
        if any(v not in allowed for v in values):
            raise ConstraintError(owner, key, value, f"{'drawn from' if per_element else 'one of'} "
                                  f"{list(allowed)}")
    for rule in rules:
        if not rule.ok(value):
            raise ConstraintError(owner, key, value, rule.rule)


def validate(obj: Any) -> None:
    """Check every field of the dataclass instance ``obj`` against its declared rules.

    With ``check_types = True`` on the class (the configs the Python API, ``probekit train
    --set`` and a diagnosis grid all build: :class:`~probekit.train.TrainConfig`,
    :class:`~probekit.models.ModelConfig`, the task configs) each value's type first
    (:func:`conforms`: ``p = 23.0`` for an int field is refused). Then ``Literal`` choices (also
    per element of a ``tuple[Literal[...], ...]``), then the ``Annotated`` constraints in order;
    ``None`` in an optional field passes (it means "the default" or "all"). Raises
    :class:`ConstraintError` for the first field that breaks one (:func:`check_value`).
    """
    for key in _constraints_of(type(obj)):
        check_value(type(obj), key, getattr(obj, key))


class Validated:
    """Mixin for a frozen config dataclass: ``__post_init__`` runs :func:`validate`.

    A subclass with rules across fields overrides ``__post_init__``, calls
    ``super().__post_init__()`` and raises :class:`~probekit.errors.KeyedValueError` itself,
    naming the offending field (``KeyedValueError("window", "window = 2 needs ...")``), so a
    file surface reports it at that key's line; :class:`~probekit.errors.ConfigError` for a
    check no one key answers for.
    """

    def __post_init__(self) -> None:
        """Check the fields' declared rules."""
        validate(self)


def keys_of(cls: type) -> list[str]:
    """The fields of ``cls`` a file may set: those in ``__init__`` (``init=False`` ones are fixed)."""
    return [f.name for f in dataclasses.fields(cls) if f.init]


def base_config(spec: Any, base: type, **overrides: Any) -> Any:
    """An instance of the base config ``base`` holding ``spec``'s values of its fields.

    For a surface spec that subclasses a method config: the method gets its own class back
    (same ``repr``, hence the same cache keys), with ``overrides`` (e.g. ``seed`` from
    ``[stats]``) replacing values.
    """
    values = {f.name: getattr(spec, f.name) for f in dataclasses.fields(base) if f.init}
    return base(**{**values, **overrides})
