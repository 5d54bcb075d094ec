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
is adding one module there (or registering from your own module before loading a file).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..util.plugins import import_submodules

__all__ = ["MeasurementKind", "get_kind", "register_measurement", "registered_kinds"]


@dataclass(frozen=True, kw_only=True)
class MeasurementKind:
    """A registered measurement kind: its name, spec class, function and whether it has a control."""

    name: str
    spec: type
    measure: Callable[..., Any]
    control: bool = False
    summary: str = ""


_REGISTRY: dict[str, MeasurementKind] = {}


def register_measurement(
    name: str, *, spec: type, control: bool = False
) -> Callable[[Callable], Callable]:
    """Decorator registering ``measure(spec, ctx)`` as the measurement kind ``name``.

    ``spec`` must be a frozen keyword-only dataclass (its fields are the claim's keys);
    ``control=True`` says ``measure`` takes ``control: bool`` and then returns a control too.
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
        old = _REGISTRY.get(name)
        if old is not None and (old.measure.__module__, old.measure.__qualname__) != (
            fn.__module__, fn.__qualname__
        ):
            raise ConfigError(
                f"measurement kind {name!r} is already registered by "
                f"{old.measure.__module__}.{old.measure.__qualname__}; choose another name"
            )
        doc = (fn.__doc__ or spec.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = MeasurementKind(
            name=name, spec=spec, measure=fn, control=control, summary=doc[0] if doc else ""
        )
        return fn

    return decorate


@functools.cache
def _load_builtin() -> None:
    """Import every module of :mod:`probekit.hypotheses.kinds` (each registers itself)."""
    import_submodules(f"{__package__}.kinds")


def registered_kinds() -> dict[str, MeasurementKind]:
    """All measurement kinds by name (built-ins loaded)."""
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def get_kind(name: str) -> MeasurementKind:
    """The kind registered as ``name``; the error lists the registered ones."""
    table = registered_kinds()
    if name not in table:
        raise ConfigError(f"no measurement kind {name!r}; registered kinds are {sorted(table)}")
    return table[name]
