"""The suite analysis registry: TOML section name -> (spec dataclass, run function).

An analysis is a frozen keyword-only spec dataclass plus ``run(spec, context) -> result``::

    @dataclass(frozen=True, kw_only=True)
    class GeometrySpec:
        label: str
        sites: tuple[str, ...] = ()

    @register_analysis("geometry", spec=GeometrySpec)
    def run_geometry(spec: GeometrySpec, ctx: AnalysisContext) -> AnalysisResult: ...

A suite then holds ``[[geometry]]`` tables, validated against ``GeometrySpec``'s fields (types,
``Literal`` choices, required keys) with ``FILE:LINE: [geometry] key`` messages, and the runner
calls ``run_geometry`` once per table. Modules in :mod:`probekit.suites.analyses` are imported
on first use of the registry, so adding an analysis is adding one module there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..util.registry import Registry

__all__ = ["ANALYSES", "Analysis", "analysis_for_spec", "get_analysis", "register_analysis", "registered"]

# Sections of a suite that are not analyses.
RESERVED_SECTIONS = ("suite", "model", "data", "capture", "stats")


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """A registered analysis: its TOML section, spec class and run function."""

    section: str
    spec: type
    run: Callable[[Any, Any], Any]
    summary: str = ""


#: The entry-point group of installed distributions' analyses (each value a module).
ENTRY_POINT_GROUP = "probekit.analyses"

#: The analyses by section name; the modules of :mod:`probekit.suites.analyses`, then the entry
#: points of :data:`ENTRY_POINT_GROUP`, load on first lookup.
ANALYSES: Registry[Analysis] = Registry(
    "analysis section", plugins=f"{__package__}.analyses", group=ENTRY_POINT_GROUP,
    hint="an analysis registers with @register_analysis(section, spec=...)",
)


def register_analysis(section: str, *, spec: type) -> Callable[[Callable], Callable]:
    """Decorator registering ``run(spec, context)`` under ``[[section]]`` with spec ``spec``.

    ``spec`` must be a frozen, keyword-only dataclass; its field annotations are what the suite
    validator checks. Registering a section twice from a different function is refused
    (a :class:`ConfigError` naming both functions).
    """
    if not section.isidentifier() or section in RESERVED_SECTIONS:
        raise ConfigError(
            f"analysis section {section!r} must be an identifier other than {RESERVED_SECTIONS}"
        )
    params = getattr(spec, "__dataclass_params__", None)
    if params is None or not params.frozen or not all(
        f.kw_only for f in dataclasses.fields(spec)
    ):
        raise ConfigError(
            f"spec {getattr(spec, '__name__', spec)!r} of analysis {section!r} must be a "
            "@dataclass(frozen=True, kw_only=True)"
        )

    def decorate(run: Callable) -> Callable:
        doc = (run.__doc__ or spec.__doc__ or "").strip().splitlines()
        ANALYSES.register(section, Analysis(section=section, spec=spec, run=run,
                                            summary=doc[0] if doc else ""), origin=run)
        return run

    return decorate


def registered() -> dict[str, Analysis]:
    """All analyses by section name (built-ins loaded)."""
    return dict(ANALYSES.items())


def get_analysis(section: str) -> Analysis:
    """The analysis registered under ``section``; the error lists the valid sections."""
    return ANALYSES.get(section)


def analysis_for_spec(spec: object) -> Analysis:
    """The analysis whose spec class ``spec`` is an instance of."""
    for analysis in registered().values():
        if type(spec) is analysis.spec:
            return analysis
    raise ConfigError(
        f"{type(spec).__name__} is not the spec of a registered analysis; register it with "
        "@register_analysis(section, spec=...)"
    )


def spec_fields(spec: type) -> list[str]:
    """Field names of a spec dataclass (the keys its TOML section accepts)."""
    from ..util.constraints import keys_of

    return keys_of(spec)
