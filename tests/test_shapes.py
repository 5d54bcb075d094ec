"""Shape checks of the public tensor functions (probekit.shapes), and a walk over all of them."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch
from jaxtyping import Float
from torch import Tensor

from probekit.errors import DataError
from probekit.shapes import ShapeError, ShapeSpec, check_shapes, parse_annotation, shape_checked

#: the packages whose public functions take tensors (stats and optim: see docs/reports.md)
PACKAGES = ["homomorphism", "geometry", "probes", "similarity", "circuits", "neurons",
            "interventions", "grokking", "kg", "capture"]


@pytest.fixture
def as_a_user():
    """Calls without the test suite's jaxtyping checks, as a user makes them."""
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", False)


def test_composite_target_widths_8_and_5_name_both_shapes_and_the_fix(as_a_user):
    """The issue's case: before, torch's "size of tensor a (8) must match ..." RuntimeError."""
    from probekit.homomorphism import composite_target

    with pytest.raises(ShapeError) as err:
        composite_target(torch.zeros(2, 10, 8), torch.zeros(2, 10, 5))
    assert str(err.value) == (
        "composite_target: b has shape (2, 10, 5) but a has shape (2, 10, 8): 'd' is 5 in b and "
        "8 in a (b: (layer, pair, d), a: (layer, pair, d)); give them the same 'd'")
    assert isinstance(err.value, DataError)  # one line, exit 2 on the CLI; still a ValueError
    out = composite_target(torch.ones(2, 10, 8), torch.full((2, 10, 8), 3.0))
    assert torch.equal(out, torch.full((2, 10, 8), 2.0))


def _spec(text: str) -> ShapeSpec:
    return ShapeSpec.parse(text)


@pytest.mark.parametrize(("layouts", "shapes", "ok"), [
    (["layer pair d", "layer pair d"], [(2, 3, 4), (2, 3, 4)], True),
    (["layer pair d", "layer pair d"], [(2, 3, 4), (2, 3, 5)], False),
    (["n 2", "n"], [(5, 2), (5,)], True),
    (["n 2"], [(5, 3)], False),
    (["*batch n", "*#batch n"], [(4, 3, 7), (1, 3, 7)], True),     # broadcast batch
    (["*batch n", "*#batch n"], [(4, 3, 7), (7,)], True),          # right-aligned
    (["*batch n", "*#batch n"], [(4, 3, 7), (2, 3, 7)], False),
    (["*batch n", "*batch n"], [(4, 7), (1, 7)], False),           # no broadcast without #
    (["#n d", "n d"], [(1, 3), (6, 3)], True),
    (["p p p"], [(5, 5, 5)], True),
    (["p p p"], [(5, 5, 4)], False),
    (["batch pos ...", "batch"], [(2, 3, 4, 5), (2,)], True),
    (["_ d", "_ d"], [(7, 3), (9, 3)], True),                      # "_" is free
    ([" p *rest"], [(5,)], True),
    ([" p *rest"], [()], False),
])
def test_layouts_bind_dimensions_across_arguments(layouts, shapes, ok):
    arrays = [(f"x{i}", torch.zeros(s), (_spec(t),)) for i, (t, s) in enumerate(zip(layouts, shapes,
                                                                                   strict=True))]
    if ok:
        check_shapes("f", arrays)
    else:
        with pytest.raises(ShapeError, match=r"^f: x\d has shape"):
            check_shapes("f", arrays)


def test_annotations_give_their_top_level_layouts_only():
    assert [s.text for s in parse_annotation("Float[Tensor, 'layer n d'] | Float[Tensor, 'n d'] | "
                                             "Mapping[Any, Tensor]")] == ["layer n d", "n d"]
    assert [(s.text, s.array) for s in parse_annotation(
        "Float[Tensor, 'n1 d1'] | Float[np.ndarray, 'n1 d1']")] == [("n1 d1", "torch"),
                                                                     ("n1 d1", "numpy")]
    assert parse_annotation("Sequence[Float[Tensor, 'n d']]") == ()  # a list of arrays: its own check
    assert parse_annotation("int | None") == ()


def test_union_message_lists_every_layout_and_non_arrays_pass():
    @shape_checked
    def f(acts: Float[Tensor, "layer n d"] | Float[Tensor, "n d"] | Mapping[Any, Tensor]) -> int:
        return 1

    with pytest.raises(ShapeError, match=r"^f: acts has shape \(5,\); expected \(layer, n, d\) or "
                                         r"\(n, d\); pass acts in one of these layouts$"):
        f(torch.zeros(5))
    assert f({"a": torch.zeros(1)}) == 1 and f(torch.zeros(2, 3)) == 1
    with pytest.raises(TypeError, match="declares no array layouts"):
        shape_checked(lambda x: x)
    with pytest.raises(ShapeError, match=r"^f: x0 has shape \(5, 3\), but its layout \(\*b, n, 2\) "
                                         r"fixes an axis at size 2; pass x0 in that layout$"):
        check_shapes("f", [("x0", np.zeros((5, 3)), (_spec("*b n 2"),))])


def test_only_the_alternatives_of_the_arguments_array_type_are_checked():
    """As jaxtyping reads a union: ``Float[Tensor, "n d"] | np.ndarray`` takes any ndarray."""

    @shape_checked
    def f(x: Float[Tensor, "n d"] | np.ndarray, y: Float[np.ndarray, " n"] | None = None) -> int:
        return 1

    assert f(np.zeros(5)) == 1 and f(np.zeros((2, 3, 4))) == 1
    assert f(torch.zeros(5, 2), y=torch.zeros(4)) == 1  # a tensor y: not declared, the body's
    with pytest.raises(ShapeError, match=r"^f: x has shape \(5,\) \(1-D\); expected \(n, d\)"):
        f(torch.zeros(5))
    with pytest.raises(ShapeError, match=r"'n' is 4 in y and 5 in x"):
        f(torch.zeros(5, 2), y=np.zeros(4))


# ------------------------------------------------------------ the walk over the public API


def _public_tensor_functions() -> list[tuple[str, object]]:
    found = {}
    for package in PACKAGES:
        module = importlib.import_module(f"probekit.{package}")
        for name in getattr(module, "__all__", None) or dir(module):
            obj = getattr(module, name, None)
            if inspect.isfunction(obj) and obj.__module__.startswith("probekit."):
                sig = inspect.signature(obj)
                if any(parse_annotation(p.annotation) for p in sig.parameters.values()):
                    found[f"{package}.{name}"] = obj
    return sorted(found.items())


PUBLIC = _public_tensor_functions()


def test_every_public_function_with_array_layouts_is_checked():
    unchecked = [name for name, fn in PUBLIC if not hasattr(fn, "__shape_layouts__")]
    assert not unchecked
    assert len(PUBLIC) == 64


def _mismatches(fn) -> list[tuple[str, dict, str, tuple]]:
    """Per declared argument: the call's arrays with that argument's shape broken, and why.

    Every dimension name gets its own size (2 + its index); a variadic ``*name`` one axis of 2.
    The broken argument gets one shared dimension one larger (its partner's shape must then be
    named too) or, with no shared name, no axis at all (a 0-d tensor).
    """
    sig = inspect.signature(fn)
    declared = {n: next(s for s in parse_annotation(p.annotation) if not s.any_shape)
                for n, p in sig.parameters.items() if parse_annotation(p.annotation)}
    names: dict[str, int] = {}
    for spec in declared.values():
        for kind, value in spec.axes:
            if kind in ("name", "bname"):
                names.setdefault(value, 2 + len(names))

    def shape_of(spec: ShapeSpec, bump: str | None = None) -> tuple[int, ...]:
        sizes = [value if kind == "int" else names[value] + (value == bump) if kind != "free"
                 else 3 for kind, value in spec.axes]
        if spec.variadic is not None:
            sizes[spec.variadic:spec.variadic] = [2] if spec.variadic_name else []
        return tuple(sizes)

    good = {n: shape_of(s) for n, s in declared.items()}
    out = []
    for arg, spec in declared.items():
        partners = {v: o for o, s in declared.items() if o != arg for k, v in s.axes
                    if k == "name" and any(k2 == "name" and v2 == v for k2, v2 in spec.axes)}
        if partners:
            dim = next(iter(partners))
            shapes = {**good, arg: shape_of(spec, bump=dim)}
            out.append((arg, shapes, "pair", tuple(o for o in declared if o != arg)))
        elif spec.axes:
            out.append((arg, {**good, arg: ()}, "ndim", ()))
    return out


CASES = [(name, fn, arg, shapes, kind, named) for name, fn in PUBLIC
         for arg, shapes, kind, named in _mismatches(fn)]


@pytest.mark.parametrize(("name", "fn", "arg", "shapes", "kind", "others"), CASES,
                         ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_a_broken_shape_is_a_shape_error_naming_the_shapes(as_a_user, name, fn, arg, shapes, kind,
                                                           others):
    """Every declared argument of every public tensor function, broken in turn.

    The other arguments are left ``None``: the check runs before the function's body, so
    nothing is computed on them (a body reached would fail on ``None``, not with ShapeError).
    """
    sig = inspect.signature(fn)
    kwargs = {n: None for n, p in sig.parameters.items()
              if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                         p.VAR_KEYWORD)}
    layouts = fn.__shape_layouts__
    kwargs.update({n: np.zeros(s) if next(x for x in layouts[n] if not x.any_shape).array == "numpy"
                   else torch.zeros(s, dtype=torch.float64) for n, s in shapes.items()})
    with pytest.raises(ShapeError) as err:
        fn(**kwargs)
    message = str(err.value)
    assert message.startswith(f"{fn.__name__}: ") and "\n" not in message
    assert f"{arg} has shape {shapes[arg]}" in message, message
    if kind == "pair":  # and the argument it disagrees with, by its own shape
        assert any(f"but {o} has shape {shapes[o]}" in message or f"{o} has shape {shapes[o]} but"
                   in message for o in others), message
    assert ("give them the same" in message) if kind == "pair" else ("reshape" in message
                                                                     or "layouts" in message)
