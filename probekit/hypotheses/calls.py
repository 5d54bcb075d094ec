"""Calling a measurement kind: a plug-in's failure blames the plug-in, one line.

A kind of the user's own code (a file's ``[plugins]`` module, an installed entry point) runs
inside probekit's process; whatever it does wrong must reach the user as one line naming what
was measured, the kind and its module, never as a traceback read as "a bug in probekit":

* an exception it raises (``SystemExit`` included: ``sys.exit()`` inside a kind must not end
  probekit with the kind's exit status and nothing measured) is a
  :class:`~probekit.errors.PluginError` ``SUBJECT (kind 'K' from plug-in 'M'): TYPE: MESSAGE``;
* a result that is not a :class:`~probekit.hypotheses.measurement.Measurement` (a bare float, a
  dict, an array) is a ``PluginError`` naming the type it returned;
* a :class:`~probekit.errors.NotApplicableError` passes unchanged (the not-applicable cell);
* a probekit error raised inside a built-in kind keeps its type; a non-finite result (the
  ``Measurement``'s NaN check) gets the subject in front, so it names the marker and model.

``SUBJECT`` is ``claim 'NAME'`` or ``marker 'NAME' on model 'MODEL'`` (:func:`call_kind`).
"""

from __future__ import annotations

from typing import Any

from ..errors import NonFiniteError, NotApplicableError, PluginError, ProbekitError
from ..util.plugins import first_line
from .measurement import Measurement
from .registry import MeasurementKind

__all__ = ["BUILTIN_PREFIX", "call_kind", "kind_plugin"]

#: modules of probekit's own kinds (anything else is a plug-in)
BUILTIN_PREFIX = "probekit."


def kind_plugin(kind: MeasurementKind) -> str | None:
    """The module that defines ``kind`` when it is a plug-in's (``None``: built into probekit)."""
    module = getattr(kind.measure, "__module__", None) or "?"
    return None if module.startswith(BUILTIN_PREFIX) else module


def _describe(kind: MeasurementKind) -> str:
    plugin = kind_plugin(kind)
    return f"kind {kind.name!r}" + ("" if plugin is None else f" from plug-in {plugin!r}")


def call_kind(kind: MeasurementKind, spec: Any, ctx: Any, *, subject: str,
              control: bool | None = None) -> Measurement:
    """``kind.measure(spec, ctx[, control=control])``, its failures named by ``subject``.

    Args:
        kind: the registered kind.
        spec: its spec instance.
        ctx: the analysis context.
        subject: what is measured, for messages (``"marker 'm' on model 'x'"``).
        control: passed as ``control=`` to a kind with a control (``None``: not passed).

    Raises:
        PluginError: a plug-in kind raised (``SystemExit`` included) or returned something
            other than a ``Measurement``.
        NonFiniteError: a non-finite estimate or value, prefixed with ``subject`` and the kind.
        NotApplicableError: unchanged.
    """
    plugin = kind_plugin(kind)
    head = f"{subject} ({_describe(kind)})"
    try:
        result = (kind.measure(spec, ctx) if control is None
                  else kind.measure(spec, ctx, control=control))
    except NotApplicableError:
        raise
    except NonFiniteError as err:
        raise NonFiniteError(f"{head}: {err}") from None
    except ProbekitError as err:
        if plugin is None:
            raise
        raise PluginError(f"{head}: {first_line(err)}") from None
    except (Exception, SystemExit) as err:
        if plugin is None:
            raise
        raise PluginError(f"{head}: {first_line(err)} (an error of the plug-in's code: fix "
                          f"{plugin!r} or remove its {subject.split(' ', 1)[0]})") from None
    if not isinstance(result, Measurement):
        raise PluginError(f"{head}: returned {type(result).__name__} {_short(result)}; a "
                          "measurement kind returns a probekit.hypotheses.Measurement (values= "
                          "per-unit numbers, or estimate= with resamples=)")
    return result


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
