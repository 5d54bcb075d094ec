"""The measurement-kind registry: ``measure = "name"`` in a claim -> (spec dataclass, function).

A kind is a frozen keyword-only spec dataclass plus ``measure(spec, ctx) -> Measurement``::

    @dataclass(frozen=True, kw_only=True)
    class ProbeAccuracySpec:
        site: str

    @register_measurement("probe_accuracy", spec=ProbeAccuracySpec, control=True)
    def probe_accuracy(spec, ctx, *, control=False) -> Measurement: ...

The spec's fields are the claim's own keys, validated like suite sections (``FILE:LINE:
[claim] key`` messages). ``control=True`` kinds accept ``control=`` and then also measure a
control, which ``compare = "greater_than_control"`` needs. Modules in
:mod:`probekit.hypotheses.kinds` are imported on first use of the registry, so adding a kind
is adding one module there. Kinds of the user's own code come from a module named by a
file's ``[plugins] modules`` (:mod:`probekit.hypotheses.plugins`) or from an installed
distribution's entry point in the group ``probekit.kinds`` (:data:`ENTRY_POINT_GROUP`), imported
only when a file names a kind that neither the built-ins nor its own plug-ins define
(:func:`find_kind`): a broken installed plug-in stops only such files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..util.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "MEASUREMENT_KINDS", "MeasurementKind", "find_kind", "get_kind",
           "kinds_needing_a_testbed", "register_measurement", "registered_kinds", "unknown_kind_note"]


@dataclass(frozen=True, kw_only=True)
class MeasurementKind:
    """A registered measurement kind: its name, spec class, function and whether it has a control.

    ``needs_testbed``: what the kind reads of a testbed's own structure, which a real LM lacks
    (``"the Fourier key frequencies of a modular-addition checkpoint"``; ``""``: any model).
    """

    name: str
    spec: type
    measure: Callable[..., Any]
    control: bool = False
    summary: str = ""
    needs_testbed: str = ""


#: The entry-point group of installed distributions' measurement kinds (each value a module).
ENTRY_POINT_GROUP = "probekit.kinds"

#: The measurement kinds by name; the modules of :mod:`probekit.hypotheses.kinds`, then the
#: entry points of :data:`ENTRY_POINT_GROUP`, load on first lookup.
MEASUREMENT_KINDS: Registry[MeasurementKind] = Registry(
    "measurement kind", plugins=f"{__package__}.kinds", group=ENTRY_POINT_GROUP,
    hint="a kind registers with @register_measurement(name, spec=...)",
)


def register_measurement(
    name: str, *, spec: type, control: bool = False, needs_testbed: str = ""
) -> Callable[[Callable], Callable]:
    """Decorator registering ``measure(spec, ctx)`` as the measurement kind ``name``.

    ``spec`` must be a frozen keyword-only dataclass (its fields are the claim's keys);
    ``control=True`` says ``measure`` takes ``control: bool`` and then returns a control too;
    ``needs_testbed`` says what of a testbed's own structure it reads (a diagnosis refuses the
    kind on a real LM, naming it). Registering a name twice from a different function is refused (naming both).
    """
    if not name.isidentifier():
        raise ConfigError(f"measurement kind {name!r} must be an identifier (e.g. 'probe_accuracy')")
    params = getattr(spec, "__dataclass_params__", None)
    if params is None or not params.frozen or not all(f.kw_only for f in dataclasses.fields(spec)):
        raise ConfigError(
            f"spec {getattr(spec, '__name__', spec)!r} of measurement kind {name!r} must be a "
            "@dataclass(frozen=True, kw_only=True)"
        )

    def decorate(fn: Callable) -> Callable:
        doc = (fn.__doc__ or spec.__doc__ or "").strip().splitlines()
        MEASUREMENT_KINDS.register(name, MeasurementKind(
            name=name, spec=spec, measure=fn, control=control, summary=doc[0] if doc else "",
            needs_testbed=needs_testbed,
        ), origin=fn)
        return fn

    return decorate


def kinds_needing_a_testbed() -> dict[str, str]:
    """The kinds defined on a testbed's own structure -> what they need (``needs_testbed``)."""
    return {name: kind.needs_testbed for name, kind in MEASUREMENT_KINDS.items() if kind.needs_testbed}


def registered_kinds() -> dict[str, MeasurementKind]:
    """All measurement kinds by name (built-ins loaded)."""
    return dict(MEASUREMENT_KINDS.items())


def find_kind(name: object) -> MeasurementKind | None:
    """The kind registered as ``name``, or ``None``.

    Installed plug-ins are imported only when no built-in or file plug-in defines ``name``
    (:meth:`~probekit.util.registry.Registry.find`).
    """
    return MEASUREMENT_KINDS.find(name)


def unknown_kind_note() -> str:
    """What follows an unknown-kind message: the errors of installed plug-ins that failed."""
    return MEASUREMENT_KINDS.broken_note()


def get_kind(name: str) -> MeasurementKind:
    """The kind registered as ``name``; the error lists the registered ones."""
    return MEASUREMENT_KINDS.get(name)
