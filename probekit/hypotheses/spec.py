"""Hypothesis files (``circuits/*.toml``): a suite's model and data sections plus ``[[claim]]``s.

A claim names a registered measurement kind (``measure``), a comparison (``compare``) and a
``threshold``; its other keys are the kind's spec fields, validated like suite sections::

    [[claim]]
    name = "the answer is decodable at '=' after the MLP"
    measure = "probe_accuracy"          # a registered kind
    site = "resid_post@0"               # the kind's own keys
    compare = ">="                      # ">=", "<=", "between", "greater_than_control"
    threshold = 0.9                     # [low, high] for "between"; a margin for the control

The fixed sections (``[suite]``, ``[model]``, ``[data]``, ``[capture]``, ``[stats]``) are the
suite's, checked by :func:`probekit.suites.spec.build_suite`. ``[plugins] modules = [...]``
names modules of the user's own code that define kinds (:mod:`probekit.hypotheses.plugins`),
imported before the claims are checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..suites.registry import RESERVED_SECTIONS
from ..suites.spec import (
    Suite,
    SuiteError,
    build_suite,
    build_table,
    check_split_keys,
    location,
    read_toml,
)
from ..util.config import close_match_hint
from ..util.constraints import keys_of
from .plugins import PLUGINS_SECTION, load_plugins, parse_plugins
from .registry import find_kind, registered_kinds, unknown_kind_note

__all__ = ["COMPARISONS", "Claim", "HypothesisFile", "load_hypotheses"]

COMPARISONS = (">=", "<=", "between", "greater_than_control")
CLAIM_KEYS = ("name", "measure", "compare", "threshold")


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One ``[[claim]]``: the kind's spec and how its measurement is judged.

    Attributes:
        name: what is claimed (a sentence; default ``"<measure> <compare> <threshold>"``).
        measure: the registered measurement kind.
        compare: ``">="``, ``"<="``, ``"between"`` or ``"greater_than_control"``.
        threshold: ``(t,)``, or ``(low, high)`` for ``"between"``; for
            ``"greater_than_control"`` the margin by which the effect must exceed the control.
        spec: the kind's spec dataclass instance (the claim's other keys).
    """

    name: str
    measure: str
    compare: str
    threshold: tuple[float, ...]
    spec: Any

    def describe(self) -> str:
        """``">= 0.9"``, ``"in [0, 0.1]"`` or ``"> control + 0"``."""
        if self.compare == "between":
            return f"in [{self.threshold[0]:g}, {self.threshold[1]:g}]"
        if self.compare == "greater_than_control":
            return f"> control + {self.threshold[0]:g}"
        return f"{self.compare} {self.threshold[0]:g}"


@dataclass(frozen=True, kw_only=True)
class HypothesisFile:
    """A validated hypothesis file: the suite part (no analyses) and its claims in file order."""

    suite: Suite
    claims: tuple[Claim, ...]
    plugins: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The file's ``[suite] name`` (default: the file stem)."""
        return self.suite.name

    def to_dict(self) -> dict[str, Any]:
        """JSON form mirroring the TOML (suite sections plus the claims)."""
        import dataclasses

        out = self.suite.to_dict()
        out["claim"] = [
            {"name": c.name, "measure": c.measure, "compare": c.compare,
             "threshold": list(c.threshold), **dataclasses.asdict(c.spec)}
            for c in self.claims
        ]
        if self.plugins:
            out[PLUGINS_SECTION] = {"modules": list(self.plugins)}
        return out


def _threshold(value: Any, compare: str, where: str) -> tuple[float, ...]:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    values = value if isinstance(value, list) else [value]
    if any(number(v) and not math.isfinite(v) for v in values):
        raise SuiteError(f"{where} = {value!r}: a claimed bound must be a finite number (TOML "
                         "allows nan and inf; a claim against them can never be judged)")

    if compare == "between":
        if not (isinstance(value, list) and len(value) == 2 and all(map(number, value))):
            raise SuiteError(f"{where} = {value!r}: 'between' needs [low, high], e.g. [0.0, 0.1]")
        low, high = float(value[0]), float(value[1])
        if not low < high:
            raise SuiteError(f"{where} = {value!r}: needs low < high")
        return (low, high)
    if value is None and compare == "greater_than_control":
        return (0.0,)
    if not number(value):
        raise SuiteError(f"{where} = {value!r}: expected a number (the claimed bound)")
    return (float(value),)


def _claim(table: Any, i: int, path: Path, text: str) -> Claim:
    head = location(path, text, "claim", index=i)
    if not isinstance(table, dict):
        raise SuiteError(f"{head}: expected a table ([[claim]])")
    measure = table.get("measure")
    if measure is None:
        raise SuiteError(f"{head}: missing required key 'measure'; registered kinds are "
                         f"{sorted(registered_kinds())}")
    kind = find_kind(measure)  # installed plug-ins imported only for a kind no other defines
    if kind is None:
        kinds = registered_kinds()
        hint = close_match_hint(str(measure), kinds)
        raise SuiteError(
            f"{location(path, text, 'claim', 'measure', i)} = {measure!r}: unknown measurement "
            f"kind{hint}; registered kinds are {sorted(kinds)}{unknown_kind_note()}"
        )
    import dataclasses

    fields = keys_of(kind.spec)
    for key in table:
        if key not in CLAIM_KEYS and key not in fields:
            valid = sorted({*CLAIM_KEYS, *fields})
            raise SuiteError(
                f"{location(path, text, 'claim', key, i)}: unknown key{close_match_hint(key, valid)} "
                f"for measure {measure!r}; valid keys are {valid}"
            )
    compare = table.get("compare")
    if compare is None:
        raise SuiteError(f"{head}: missing required key 'compare'; give one of {list(COMPARISONS)}")
    if compare not in COMPARISONS:
        raise SuiteError(
            f"{location(path, text, 'claim', 'compare', i)} = {compare!r}: must be one of "
            f"{list(COMPARISONS)}"
        )
    if compare == "greater_than_control" and not kind.control:
        with_control = sorted(k for k, v in registered_kinds().items() if v.control)
        raise SuiteError(
            f"{location(path, text, 'claim', 'compare', i)}: measure {measure!r} supplies no control; "
            f"use '>=', '<=' or 'between', or a kind with a control: {with_control}"
        )
    if "threshold" not in table and compare != "greater_than_control":
        raise SuiteError(f"{head}: missing required key 'threshold' (a number; [low, high] for between)")
    threshold = _threshold(table.get("threshold"), compare,
                           location(path, text, "claim", "threshold", i))
    spec = build_table(kind.spec, {k: v for k, v in table.items() if k in fields},
                       path, text, "claim", index=i)
    name = table.get("name")
    if name is not None and not isinstance(name, str):
        raise SuiteError(f"{location(path, text, 'claim', 'name', i)} = {name!r}: expected a string")
    claim = Claim(name="", measure=measure, compare=compare, threshold=threshold, spec=spec)
    return dataclasses.replace(claim, name=name or f"{measure} {claim.describe()}")


def load_hypotheses(path: str | Path) -> HypothesisFile:
    """Parse and validate a hypothesis file; errors are ``FILE:LINE: [section] key ...``."""
    path, text, raw = read_toml(path, what="hypothesis")
    valid = [*RESERVED_SECTIONS, "claim", PLUGINS_SECTION]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise SuiteError(
            f"{location(path, text, unknown[0])}: unknown section{close_match_hint(unknown[0], valid)}; "
            f"valid sections are {valid}"
        )
    tables = raw.get("claim")
    if not tables:
        raise SuiteError(f"{path}: no [[claim]]; add at least one (measure, compare, threshold)")
    if not isinstance(tables, list):
        raise SuiteError(f"{location(path, text, 'claim')}: write claims as [[claim]] tables")
    plugins = parse_plugins(raw, path, text)
    load_plugins(plugins, path, text)  # the kinds of the user's modules, before the claims
    claims = tuple(_claim(t, i, path, text) for i, t in enumerate(tables))
    suite_raw = {k: v for k, v in raw.items() if k != PLUGINS_SECTION}
    suite = build_suite(path, text, suite_raw)
    for i, claim in enumerate(claims):  # the run's split rule, before any model loads
        check_split_keys(claim.spec, suite.data, lambda key, i=i: location(path, text, "claim", key, i))
    return HypothesisFile(suite=suite, claims=claims, plugins=plugins)
