"""Shape checks at the public tensor entry points, read from the functions' own annotations.

A leaf module (imports only :mod:`probekit.errors`). Every public function that takes tensors
declares their layouts in jaxtyping annotations (``a: Float[Tensor, "layer pair d"]``); the test
suite enforces them (``--jaxtyping-packages``), a user's call did not, so a width mismatch
ended in torch's ``RuntimeError: The size of tensor a (8) must match ...``. :func:`shape_checked`
makes the annotation the check, in every call, with a probekit error naming each shape and the
fix::

    @shape_checked
    def composite_target(a: Float[Tensor, "layer pair d"], b: Float[Tensor, "layer pair d"]): ...

    composite_target(torch.zeros(2, 10, 8), torch.zeros(2, 10, 5))
    # ShapeError: composite_target: b has shape (2, 10, 5) but a has shape (2, 10, 8): 'd' is
    # 5 in b and 8 in a (b: (layer, pair, d), a: (layer, pair, d)); give them the same 'd'

The dimension language is jaxtyping's: a name binds one size across every argument of the
call; an integer is that size; ``#name`` also accepts 1 (broadcasting); ``*name`` binds any
number of leading/trailing axes (the same tuple everywhere); ``...``, ``*_``, ``_`` and ``_name``
are free. Only top-level alternatives of an annotation are read (``X | None``, ``Float[Tensor,
"layer n d"] | Float[Tensor, "n d"]``: one of them must fit), and only those of the argument's
array type, as jaxtyping reads them (``Float[Tensor, "n d"] | np.ndarray`` checks a tensor and
leaves an ndarray of any shape to the function); an argument without a ``shape`` (a list, a
mapping, ``None``) is left to the function's own checks. Dtypes are not checked.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import DataError

__all__ = ["ShapeError", "ShapeSpec", "check_shapes", "parse_annotation", "shape_checked"]

F = TypeVar("F", bound=Callable[..., Any])

#: ``Dtype[ArrayType, "dims"]``: one jaxtyping array annotation (the whole member of a union)
_ARRAY = re.compile(r"^\s*[A-Za-z_][\w.]*\[\s*([A-Za-z_][\w.]*)\s*,\s*(['\"])(.*)\2\s*\]\s*$")
#: a bare array type: an alternative that accepts any shape of that type
_BARE = re.compile(r"^\s*((?:torch\.)?Tensor|(?:np\.|numpy\.)?ndarray)\s*$")
_NAME = re.compile(r"^[A-Za-z][\w]*$")


class ShapeError(DataError):
    """A tensor argument whose shape does not fit the function's declared layout."""


@dataclass(frozen=True)
class ShapeSpec:
    """One declared layout, e.g. ``"*lay n d"``: its axes, and where its variadic part sits.

    Attributes:
        text: the layout as written.
        axes: per fixed axis ``(kind, value)``: ``("name", "d")``, ``("bname", "d")`` (``#d``),
            ``("int", 8)`` or ``("free", "_")``.
        variadic: index in ``axes`` where the variadic part goes (None: there is none).
        variadic_name: its name (``None``: anonymous ``...``/``*_``); ``variadic_broadcast``: ``*#``.
    """

    text: str
    axes: tuple[tuple[str, Any], ...]
    variadic: int | None = None
    variadic_name: str | None = None
    variadic_broadcast: bool = False
    array: str = ""
    any_shape: bool = False

    @classmethod
    def parse(cls, text: str, array: str = "") -> ShapeSpec:
        """The layout ``text`` (jaxtyping's dimension string) of an ``array`` (``_array_kind``)."""
        axes: list[tuple[str, Any]] = []
        variadic, vname, vbroad = None, None, False
        for token in text.split():
            if token == "..." or token.startswith("*"):
                name = token.lstrip("*")
                vbroad = name.startswith("#")
                name = name.lstrip("#")
                variadic = len(axes)
                vname = name if token != "..." and _NAME.match(name) else None
                continue
            broadcast = token.startswith("#")
            token = token.lstrip("#?")
            if token.isdigit():
                axes.append(("int", int(token)))
            elif _NAME.match(token):
                axes.append(("bname" if broadcast else "name", token))
            else:  # "_", "_name", expressions such as "n+1": not checked
                axes.append(("free", token))
        return cls(text, tuple(axes), variadic, vname, vbroad, array)

    @property
    def layout(self) -> str:
        """``(layer, pair, d)``: the layout for messages."""
        return "(" + ", ".join(self.text.split()) + ")"

    def match(self, shape: tuple[int, ...], bound: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """``(new bindings, "")`` if ``shape`` fits given ``bound``, else ``({}, reason)``.

        The reason is ``"ndim"``, ``"int:I"`` (``axes[I]``, a fixed size, differs) or
        ``"dim:NAME"`` (a name bound to another size).
        """
        fixed = len(self.axes)
        if len(shape) != fixed if self.variadic is None else len(shape) < fixed:
            return {}, "ndim"
        if self.variadic is None:
            pairs = list(zip(self.axes, shape, strict=True))
            middle: tuple[int, ...] = ()
        else:
            k, after = self.variadic, fixed - self.variadic
            middle = shape[k:len(shape) - after]
            pairs = list(zip(self.axes, shape[:k] + shape[len(shape) - after:], strict=True))
        new: dict[str, Any] = {}
        for i, ((kind, value), size) in enumerate(pairs):
            if kind == "int" and size != value:
                return {}, f"int:{i}"
            if kind in ("name", "bname"):
                have = new.get(value, bound.get(value))
                if kind == "bname" and size == 1:
                    continue
                if have is None or (kind == "bname" and have == 1):
                    new[value] = size
                elif have != size:
                    return {}, f"dim:{value}"
        if self.variadic_name is not None:
            key = "*" + self.variadic_name
            have = bound.get(key)
            if have is None:
                new[key] = middle
            elif not _same_batch(have, middle, self.variadic_broadcast):
                return {}, f"dim:{key}"
        return new, ""


def _same_batch(have: tuple[int, ...], got: tuple[int, ...], broadcast: bool) -> bool:
    """Equal, or with ``*#name`` broadcastable (numpy's rule: right-aligned, equal or 1)."""
    if not broadcast:
        return have == got
    return all(a == b or a == 1 or b == 1 for a, b in zip(reversed(have), reversed(got)))


def parse_annotation(annotation: Any) -> tuple[ShapeSpec, ...]:
    """The layouts of a (string) annotation's top-level array alternatives (``()``: none)."""
    if not isinstance(annotation, str):
        return ()
    annotation = annotation.strip()
    if len(annotation) > 1 and annotation[0] in "'\"" and annotation[-1] == annotation[0]:
        annotation = annotation[1:-1]  # a quoted annotation under ``from __future__ import annotations``
    members, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            members.append(annotation[start:i])
            start = i + 1
    members.append(annotation[start:])
    specs = []
    for member in members:
        m, bare = _ARRAY.match(member), _BARE.match(member)
        if m:
            spec = ShapeSpec.parse(m.group(3), _array_kind(m.group(1)))
        elif bare:  # e.g. ``Float[Tensor, "n d"] | np.ndarray``: an ndarray of any shape
            spec = ShapeSpec("...", (), 0, None, False, _array_kind(bare.group(1)), True)
        else:
            continue
        if spec not in specs:
            specs.append(spec)
    return tuple(specs) if any(not s.any_shape for s in specs) else ()


def _array_kind(type_name: str) -> str:
    """``"torch"``, ``"numpy"`` or ``""`` (an alias such as ``A``: any array) for a type name."""
    if "Tensor" in type_name:
        return "torch"
    return "numpy" if "ndarray" in type_name or "NDArray" in type_name else ""


def _kind_of(value: Any) -> str:
    module = type(value).__module__
    return "torch" if module.startswith("torch") else "numpy" if module == "numpy" else "other"


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, type):
        return None
    if type(shape) is tuple:  # numpy's tuple of ints (torch.Size prints itself otherwise)
        return shape
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        return None


def _describe(name: str, shape: tuple[int, ...]) -> str:
    return f"{name} has shape {shape}"


def check_shapes(fn: str, arrays: list[tuple[str, Any, tuple[ShapeSpec, ...]]]) -> dict[str, Any]:
    """Check ``(name, value, layouts)`` in order; returns the bound dimension sizes.

    Raises:
        ShapeError: naming the function, the argument's shape, the argument whose shape bound
            the clashing dimension (and its shape), both layouts and the fix.
    """
    bound: dict[str, Any] = {}
    owner: dict[str, tuple[str, tuple[int, ...], ShapeSpec]] = {}
    for name, value, declared in arrays:
        shape = _shape(value)
        if shape is None:
            continue
        kind = _kind_of(value)  # the annotation's alternatives for this array type, as jaxtyping
        specs = [s for s in declared if s.array in ("", kind)]
        if not specs or any(s.any_shape for s in specs):
            continue
        reasons = []
        for spec in specs:
            new, reason = spec.match(shape, bound)
            if not reason:
                bound.update(new)
                owner.update({k: (name, shape, spec) for k in new})
                break
            reasons.append((spec, reason))
        else:
            raise ShapeError(_message(fn, name, shape, reasons, owner))
    return bound


def _message(fn: str, name: str, shape: tuple[int, ...], reasons: list[tuple[ShapeSpec, str]],
             owner: dict[str, tuple[str, tuple[int, ...], ShapeSpec]]) -> str:
    fitting = [r for r in reasons if r[1] != "ndim"]  # alternatives of the right rank
    if len(fitting) == 1:
        reasons = fitting
    if len(reasons) > 1:
        layouts = " or ".join(s.layout for s, _ in reasons)
        return (f"{fn}: {_describe(name, shape)}; expected {layouts}; pass {name} in one of these "
                "layouts")
    spec, reason = reasons[0]
    if reason == "ndim":
        n = len(spec.axes)
        axes = f"{n}-D" if spec.variadic is None else f"at least {n}-D"
        return (f"{fn}: {_describe(name, shape)} ({len(shape)}-D); expected {spec.layout} "
                f"({axes}); reshape {name} to {spec.layout}")
    if reason.startswith("int:"):
        size = spec.axes[int(reason[4:])][1]
        return (f"{fn}: {_describe(name, shape)}, but its layout {spec.layout} fixes an axis at "
                f"size {size}; pass {name} in that layout")
    dim = reason[4:]
    if dim not in owner:  # the clash is inside this argument ("p p p", "n n")
        return (f"{fn}: {_describe(name, shape)}; the axes named '{dim}' in {spec.layout} must "
                f"have one size; pass {name} in that layout")
    other, oshape, ospec = owner[dim]
    mine = _dim_size(spec, shape, dim)
    theirs = _dim_size(ospec, oshape, dim)
    label = dim.lstrip("*")
    return (f"{fn}: {_describe(name, shape)} but {_describe(other, oshape)}: '{label}' is "
            f"{mine} in {name} and {theirs} in {other} ({name}: {spec.layout}, {other}: "
            f"{ospec.layout}); give them the same '{label}'")


def _dim_size(spec: ShapeSpec, shape: tuple[int, ...], dim: str) -> Any:
    """The size (or sizes, for ``*name``) ``dim`` has in ``shape`` under ``spec``."""
    fixed = len(spec.axes)
    k = fixed if spec.variadic is None else spec.variadic
    after = fixed - k
    if dim.startswith("*"):
        return shape[k:len(shape) - after]
    for i, (_, value) in enumerate(spec.axes):
        if value == dim:
            return shape[i] if i < k else shape[len(shape) - (fixed - i)]
    return "?"


@typing.no_type_check  # not wrapped by the test suite's jaxtyping hook: this check runs first
def shape_checked(fn: F) -> F:
    """Decorate a public tensor function: check its arguments against its array annotations.

    The annotations are parsed once, at decoration; a call costs a signature bind and one
    comparison per axis. See the module docstring for the dimension language.
    """
    sig = inspect.signature(fn)
    declared = [(n, specs) for n, p in sig.parameters.items()
                if (specs := parse_annotation(p.annotation))]
    if not declared:
        raise TypeError(f"shape_checked: {fn.__qualname__} declares no array layouts")
    name = fn.__name__
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [n for n, p in sig.parameters.items() if p.kind in kinds]
    simple = all(p.kind in (*kinds, inspect.Parameter.KEYWORD_ONLY)
                 for p in sig.parameters.values())

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if simple and len(args) <= len(positional):  # the common call: no signature bind
            given = dict(zip(positional, args, strict=False))
            given.update(kwargs)
        else:
            try:
                given = sig.bind(*args, **kwargs).arguments
            except TypeError:
                return fn(*args, **kwargs)  # Python's own message for a wrong call
        check_shapes(name, [(n, given[n], specs) for n, specs in declared if n in given])
        return fn(*args, **kwargs)

    wrapper.__shape_layouts__ = dict(declared)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
