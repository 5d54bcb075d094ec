"""Conformance checks of config dataclasses and command parsers, like scikit-learn's ``check_estimator``.

The house rule is *one declaration per option*: an option's type, default and rule live in one
frozen dataclass field (:mod:`probekit.util.constraints`); a surface that reuses it subclasses
the class (redeclaring a field only with ``init=False``, when the surface sets it itself) and a
command generates its flags from it (:mod:`probekit.util.cli_options`). The checks below find
what breaks the rule; ``tests/test_spec_checks.py`` runs them over every config of probekit and
every parser of ``probekit``, and a plug-in can run them over its own specs.

* :func:`redeclared_options`: a subclass field that repeats a base field (a key of both) with
  another default, type or rule: the option is declared twice.
* :func:`hand_written_bounds`: a ``__post_init__`` that compares one field with a constant and
  raises, a check a declared constraint (``Ge``, ``Gt``, ``Le``, ``Lt``, ``Between``, ``OneOf``
  or a ``Literal`` type) expresses with a better message and no code.
* :func:`flag_mismatches`: a generated flag whose default or choices differ from its field, or
  a hand-written flag beside generated ones that copies a field of the same config.
* :func:`same_names`: two config classes of one name in different modules.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import typing
from collections.abc import Iterable
from typing import Any

from .cli_options import flag_fields
from .constraints import constraints_of

__all__ = ["flag_mismatches", "hand_written_bounds", "redeclared_options", "same_names"]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def redeclared_options(classes: Iterable[type]) -> list[str]:
    """``CLS.field`` declared again in a subclass with another default, type or rule.

    A redeclaration with ``init=False`` (the surface sets the value itself) is allowed; so is
    one on a base that holds the field with ``init=False``.
    """
    out = []
    for cls in classes:
        own = cls.__dict__.get("__annotations__", {})
        mine = {f.name: f for f in dataclasses.fields(cls)}
        for base in cls.__mro__[1:]:
            if not dataclasses.is_dataclass(base):
                continue
            theirs = {f.name: f for f in dataclasses.fields(base)}
            for name in own:
                if name not in theirs or name not in mine:
                    continue
                a, b = mine[name], theirs[name]
                if not (a.init and b.init):
                    continue
                rule_a, rule_b = constraints_of(cls)[name], constraints_of(base)[name]
                da, db = _default(a), _default(b)
                if rule_a != rule_b or repr(da) != repr(db):
                    out.append(f"{cls.__module__}.{cls.__qualname__}.{name} redeclares "
                               f"{base.__qualname__}.{name} (default {da!r} vs {db!r}, rule "
                               f"{rule_a[1]} vs {rule_b[1]}): inherit it, or redeclare it with "
                               "init=False where the surface sets it")
            break  # the nearest dataclass base holds every inherited field
    return out


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "dataclass"


#: a loop's value standing for each field it walks (``for name in ("a", "b"): getattr(self, name)``)
_LOOP = "<each>"


def _field_of(node: ast.expr, loop: frozenset[str] = frozenset()) -> str | None:
    """``name`` of ``self.name``; :data:`_LOOP` for a loop's ``getattr(self, name)`` or its alias."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    if isinstance(node, ast.Name) and node.id in loop:
        return _LOOP
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) == 2 and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "self" and isinstance(node.args[1], ast.Name)
            and node.args[1].id in loop):
        return _LOOP
    return None


def _type_check(node: ast.expr, loop: frozenset[str]) -> str | None:
    """The field of ``isinstance(self.f, T)`` / ``not isinstance(...)`` (a type a field declares)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance" and node.args):
        return _field_of(node.args[0], loop)
    return None


def _constant(node: ast.expr) -> bool:
    """A literal, a negated literal, a collection of them or an UPPER_CASE module constant."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _constant(node.operand)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_constant(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    return False


#: comparisons whose failure a constraint states (a bound, an allow-list); ``==`` / ``in`` refuse
#: chosen values (a deny-list, e.g. a name that moved elsewhere), which no constraint words
_BOUND_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.NotIn)


def _one_field_bound(test: ast.expr, loop: frozenset[str] = frozenset()) -> str | None:
    """The field a test bounds by constants alone (``self.k < 1``, ``not 0 < self.p < 1`` ...)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _one_field_bound(test.operand, loop)
    if isinstance(test, ast.Compare):
        if not all(isinstance(op, _BOUND_OPS) for op in test.ops):
            return None
        parts = [test.left, *test.comparators]
        fields = {_field_of(p, loop) for p in parts} - {None}
        others = [p for p in parts if _field_of(p, loop) is None]
        if len(fields) == 1 and others and all(_constant(p) for p in others):
            return fields.pop()
        return None
    if isinstance(test, ast.BoolOp):
        found, bounded = set(), False
        for value in test.values:
            guard = (isinstance(value, ast.Compare) and len(value.ops) == 1
                     and isinstance(value.ops[0], (ast.IsNot, ast.Is))
                     and isinstance(value.comparators[0], ast.Constant)
                     and value.comparators[0].value is None)
            if guard and isinstance(test.op, ast.And):
                found.add(_field_of(value.left, loop))  # ``self.k is not None and self.k < 1``
                continue
            typed = _type_check(value, loop) if isinstance(test.op, ast.Or) else None
            if typed is not None:  # ``not isinstance(self.n, int) or self.n < 1``
                found.add(typed)
                continue
            field = _one_field_bound(value, loop)
            if field is None:
                return None
            found.add(field)
            bounded = True
        return found.pop() if bounded and len(found) == 1 and None not in found else None
    return None


def _checks(body: list[ast.stmt]) -> Iterable[tuple[ast.If, str, tuple[str, ...]]]:
    """``(if, field, fields walked)`` of each raising ``if`` at the top of ``body`` or of a loop.

    A loop over a tuple of field names (``for name in ("a", "b"): v = getattr(self, name)``)
    stands for the same check on each field it names.
    """
    for node in body:
        if isinstance(node, ast.If) and _raises(node.body):
            field = _one_field_bound(node.test)
            if field is not None:
                yield node, field, ()
        elif (isinstance(node, ast.For) and isinstance(node.target, ast.Name | ast.Tuple)
              and isinstance(node.iter, ast.Tuple | ast.List)):
            names, loop = _loop_fields(node)
            for inner in node.body:
                if isinstance(inner, ast.Assign) and len(inner.targets) == 1 \
                        and isinstance(inner.targets[0], ast.Name) \
                        and _field_of(inner.value, loop) == _LOOP:
                    loop = loop | {inner.targets[0].id}
                if (isinstance(inner, ast.If) and _raises(inner.body) and names
                        and _one_field_bound(inner.test, loop) == _LOOP):
                    yield inner, _LOOP, names


def _loop_fields(node: ast.For) -> tuple[tuple[str, ...], frozenset[str]]:
    """The field names a ``for`` walks and the loop variable naming them."""
    target = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
    names = []
    for elt in node.iter.elts:  # type: ignore[attr-defined]
        first = elt.elts[0] if isinstance(elt, ast.Tuple) and elt.elts else elt
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            return (), frozenset()
        names.append(first.value)
    return tuple(names), frozenset({target.id}) if isinstance(target, ast.Name) else frozenset()


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body)


def hand_written_bounds(source: str, filename: str = "<source>") -> list[str]:
    """``FILE:LINE: CLS.__post_init__ bounds FIELD by hand``: checks a declared rule expresses.

    Looks at the ``__post_init__`` of every ``@dataclass`` class of ``source`` for an ``if``
    whose test compares one field with constants only (``self.batch_size < 1``,
    ``self.side not in ("left", "right")``, ``not 0 < self.p < 1``, the same behind ``self.k is
    not None and``) and whose body raises. Checks across fields, on derived values or through
    a function are not flagged: they are the ``__post_init__``'s job.
    """
    tree = ast.parse(source, filename=filename)
    out = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if not any(_is_dataclass_decorator(d) for d in cls.decorator_list):
            continue
        fields = {s.target.id for s in cls.body
                  if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        methods = {s.name for s in cls.body if isinstance(s, ast.FunctionDef)}
        post = next((s for s in cls.body
                     if isinstance(s, ast.FunctionDef) and s.name == "__post_init__"), None)
        if post is None:
            continue
        for node, field, walked in _checks(post.body):  # top level only: a nested check is a rule across fields
            for name in walked or (field,):
                if name in fields or (name not in methods and not walked):
                    where = "" if name in fields else "the inherited field "
                    out.append(f"{filename}:{node.lineno}: {cls.name}.__post_init__ bounds "
                               f"{where}{name!r} by hand ({ast.unparse(node.test)}); declare the "
                               "rule on the field (Annotated[..., Ge(...)], Between, OneOf or a "
                               "Literal type)")
    return out


def _subparsers(parser: argparse.ArgumentParser) -> Iterable[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _subparsers(sub)


def _choices(annotation: Any) -> list[Any] | None:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    inner = args[0] if len(args) == 1 and len(args) < len(typing.get_args(annotation)) else annotation
    return list(typing.get_args(inner)) if typing.get_origin(inner) is typing.Literal else None


def flag_mismatches(parser: argparse.ArgumentParser) -> list[str]:
    """Flags of ``parser`` (and its subcommands) that disagree with their config field.

    A flag generated by :func:`~probekit.util.cli_options.add_config_flags` must keep its
    field's default and ``Literal`` choices; a hand-written flag of a command with generated
    flags must not copy a field of the same configs (generate it instead).
    """
    out = []
    for prog, p in _subparsers(parser):
        generated = flag_fields(p)
        configs = {cls for cls, _ in generated.values()}
        for action in p._actions:
            strings = "/".join(action.option_strings)
            if action.dest in generated:
                cls, name = generated[action.dest]
                field = {f.name: f for f in dataclasses.fields(cls)}[name]
                want = _default(field)
                if repr(action.default) != repr(want):
                    out.append(f"{prog} {strings}: default {action.default!r} but "
                               f"{cls.__name__}.{name} = {want!r}")
                choices = _choices(constraints_of(cls)[name][0])
                if choices is not None and list(action.choices or []) != choices:
                    out.append(f"{prog} {strings}: choices {action.choices} but "
                               f"{cls.__name__}.{name} is one of {choices}")
                continue
            for cls in configs:
                if action.option_strings and action.dest in {f.name for f in dataclasses.fields(cls)}:
                    out.append(f"{prog} {strings}: a hand-written copy of {cls.__name__}."
                               f"{action.dest}; generate it with add_config_flags")
    return out


def same_names(classes: Iterable[type]) -> list[str]:
    """Config classes that share a name across modules (a name must say which one it is)."""
    seen: dict[str, list[type]] = {}
    for cls in classes:
        seen.setdefault(cls.__name__, []).append(cls)
    return [f"{name}: " + ", ".join(f"{c.__module__}.{c.__qualname__}" for c in group)
            for name, group in seen.items() if len({(c.__module__, c.__qualname__) for c in group}) > 1]
