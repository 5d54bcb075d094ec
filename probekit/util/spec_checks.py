"""Conformance checks of config dataclasses and command parsers, like scikit-learn's ``check_estimator``.

The house rule is *one declaration per option*: an option's type, default and rule live in one
frozen dataclass field (:mod:`probekit.util.constraints`); a surface that reuses it subclasses
the class (redeclaring a field only with ``init=False``, when the surface sets it itself) and a
command generates its flags from it (:mod:`probekit.util.cli_options`). The checks below find
what breaks the rule; ``tests/test_spec_checks.py`` runs them over every config of probekit and
every parser of ``probekit``, and a plug-in can run them over its own specs.

The source checks work on the parsed modules (:func:`read_modules`; nothing is imported, so
walking all of probekit takes a second):

* :func:`redeclared_options`: a subclass field that repeats a base field (a key of both); the
  option is declared twice, and the two copies drift (another default, another bound).
* :func:`hand_written_bounds`: a ``__post_init__`` that compares one field with a constant and
  raises, a check a declared constraint (``Ge``, ``Gt``, ``Le``, ``Lt``, ``Between``, ``OneOf``
  or a ``Literal`` type) expresses with a better message and no code.
* :func:`same_names`: two config classes of one name in different modules.

And on a built parser:

* :func:`flag_mismatches`: a generated flag whose default or choices differ from its field, or
  a hand-written flag beside generated ones that copies a field of the same config.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import textwrap
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cli_options import flag_fields
from .constraints import constraints_of

__all__ = ["Module", "dataclasses_of", "flag_mismatches", "hand_written_bounds", "parse_modules",
           "read_modules", "redeclared_options", "same_names"]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


@dataclass(frozen=True)
class Module:
    """One module's parsed source: its name, whether it is a package, its tree, its file name."""

    name: str
    package: bool
    tree: ast.Module
    filename: str


def read_modules(root: Path) -> dict[str, Module]:
    """``{module name: Module}`` of every ``.py`` file under the package folder ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if package else parts)
        source = path.read_text(encoding="utf-8")
        out[name] = Module(name, package, ast.parse(source, filename=str(path)),
                           str(path.relative_to(root.parent)))
    return out


def parse_modules(sources: Mapping[str, str]) -> dict[str, Module]:
    """:func:`read_modules` of in-memory sources (``{"pkg.mod": source}``; no packages)."""
    return {n: Module(n, False, ast.parse(textwrap.dedent(s)), n.replace(".", "/") + ".py")
            for n, s in sources.items()}


def dataclasses_of(modules: Mapping[str, Module]) -> list[tuple[Module, ast.ClassDef]]:
    """Every ``@dataclass`` class at the top level of the modules."""
    return [(m, n) for m in modules.values() for n in m.tree.body
            if isinstance(n, ast.ClassDef) and any(_is_dataclass_decorator(d) for d in n.decorator_list)]


def _resolve(modules: Mapping[str, Module], module: Module, name: str,
             depth: int = 0) -> tuple[Module, ast.ClassDef] | None:
    """The class ``name`` means in ``module``: defined there or imported (``from .x import name``)."""
    if depth > 8:
        return None
    for node in module.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    for node in module.tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            base = module.name.split(".") if module.package else module.name.split(".")[:-1]
            if node.level:
                base = base[:len(base) - node.level + 1] if node.level > 1 else base
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                target = node.module or ""
            if target in modules:
                return _resolve(modules, modules[target], alias.name, depth + 1)
    return None


def _fields(cls: ast.ClassDef) -> dict[str, tuple[str, str | None, bool]]:
    """``{field: (annotation, default, init)}`` of a class body (``ClassVar`` ones left out)."""
    out = {}
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        annotation = ast.unparse(node.annotation)
        if annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = node.value
        init = not (isinstance(value, ast.Call) and any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in value.keywords))
        out[node.target.id] = (annotation, None if value is None else ast.unparse(value), init)
    return out


def _inherited(modules: Mapping[str, Module], module: Module, cls: ast.ClassDef,
               depth: int = 0) -> dict[str, tuple[str, tuple[str, str | None, bool]]]:
    """``{field: (declaring class, field)}`` of the dataclass bases of ``cls`` (nearest first)."""
    out: dict[str, tuple[str, tuple[str, str | None, bool]]] = {}
    for base in cls.bases:
        if not isinstance(base, ast.Name) or depth > 8:
            continue
        found = _resolve(modules, module, base.id)
        if found is None:
            continue
        where, node = found
        for name, spec in _inherited(modules, where, node, depth + 1).items():
            out.setdefault(name, spec)
        for name, spec in _fields(node).items():
            out[name] = (node.name, spec)
    return out


def redeclared_options(modules: Mapping[str, Module], suffixes: tuple[str, ...] = ("",)) -> list[str]:
    """``FILE:LINE: CLS.field`` declared again over a base class field: the option twice.

    A subclass inherits the field or, where its surface sets the value itself, redeclares it
    with ``field(..., init=False)`` (so may a base that holds it with ``init=False``); it may
    also make a defaulted key required (same type, no default). Any other redeclaration is a
    second declaration. ``suffixes``: check only the classes whose name ends so (the configs).
    """
    out = []
    for module, cls in dataclasses_of(modules):
        if not cls.name.endswith(suffixes):
            continue
        inherited = _inherited(modules, module, cls)
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            name = node.target.id
            mine = _fields(cls).get(name)
            if name not in inherited or mine is None:
                continue
            owner, theirs = inherited[name]
            if not (mine[2] and theirs[2]):
                continue
            if mine[1] is None and mine[0] == theirs[0]:
                continue  # the surface requires a key its method defaults (a claim names its block)
            out.append(f"{module.filename}:{node.lineno}: {cls.name}.{name} redeclares "
                       f"{owner}.{name} ({mine[0]} = {mine[1]} over {theirs[0]} = {theirs[1]}): "
                       "inherit it, or redeclare it with field(..., init=False) where the "
                       "surface sets it itself")
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


def hand_written_bounds(modules: Mapping[str, Module]) -> list[str]:
    """``FILE:LINE: CLS.__post_init__ bounds FIELD by hand``: checks a declared rule expresses.

    Looks at the ``__post_init__`` of every ``@dataclass`` class for an ``if`` whose test
    compares one field with constants only (``self.batch_size < 1``, ``self.side not in
    ("left", "right")``, ``not 0 < self.p < 1``, the same behind ``self.k is not None and`` or
    beside ``isinstance`` checks of the field, or in a loop over field names) and whose body
    raises. Checks across fields, on derived values, nested in another condition or through a
    function are not flagged: they are the ``__post_init__``'s job.
    """
    out = []
    for module, cls in dataclasses_of(modules):
        filename = module.filename
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


def same_names(modules: Mapping[str, Module], suffixes: tuple[str, ...]) -> list[str]:
    """Dataclasses named ``*Spec``, ``*Config`` ... (``suffixes``) defined in two modules."""
    seen: dict[str, list[str]] = {}
    for module, cls in dataclasses_of(modules):
        if cls.name.endswith(suffixes):
            seen.setdefault(cls.name, []).append(module.name)
    return [f"{name}: " + ", ".join(f"{m}.{name}" for m in where)
            for name, where in seen.items() if len(where) > 1]
