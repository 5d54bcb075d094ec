"""probekit's exception classes: every error of probekit's own is a :class:`ProbekitError`.

The CLI prints a ``ProbekitError`` as one line (exit 2); anything else is a bug and keeps its
traceback. Each class also derives from the builtin a caller would naturally catch (a bad value is
still a ``ValueError``), so ``except ValueError`` keeps working.

Messages name the bad value, what was expected and the fix, e.g.
``label count 90 does not match 100 activation rows; pass one label per row``.
"""

from __future__ import annotations


class ProbekitError(Exception):
    """Base class of probekit's own errors (one-line message, exit 2 on the CLI)."""


class ConfigError(ProbekitError, ValueError):
    """A spec, option or argument is invalid (unknown key, wrong type, out of range)."""


class KeyedValueError(ConfigError):
    """A config's value refused by the config itself, naming the offending field ``key``.

    Raised by a config's own checks (``__post_init__``, and the field rules of
    :class:`probekit.util.constraints.Validated` through its subclass ``ConstraintError``), so a
    surface that built the config from a file reports the message at ``key``'s line
    (:func:`probekit.suites.spec.build_table`) without reading the key out of the message.
    """

    def __init__(self, key: str, message: str) -> None:
        """``key``: the field whose value is refused; ``message``: the whole one-line message."""
        self.key = key
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Pickle as ``(key, message)`` (an executor worker's error reaches the caller whole)."""
        return type(self), (self.key, str(self))


class DataError(ProbekitError, ValueError):
    """Input data is unusable: wrong shape, count mismatch, missing column, bad token id."""


class NonFiniteError(DataError):
    """NaN or inf where finite numbers are required (activations, labels, features)."""


class NotApplicableError(ConfigError):
    """A measurement is undefined for this model or task (e.g. Fourier measures on SCAN).

    The diagnosis records such a (checkpoint, marker) cell as an explicit "not applicable" row
    with this message, never as a silent NaN; elsewhere it is an ordinary configuration error.
    """


class PluginError(ProbekitError, RuntimeError):
    """A plug-in's own code failed: it raised, exited, or returned the wrong type.

    The message blames the plug-in, naming what was measured, the kind and the module
    (``marker 'm' on model 'x' (kind 'k' from plug-in 'mod'): ZeroDivisionError: ...``).
    """


class StoreError(ProbekitError, RuntimeError):
    """An activation store is missing, incomplete, corrupted or made by a different run."""


class CorruptFileError(ProbekitError, ValueError):
    """A file probekit wrote fails its checksum or is truncated (the message names it and the fix)."""


class ModelLoadError(ProbekitError, RuntimeError):
    """A model or checkpoint cannot be loaded (missing files, pickle, shape mismatch, extra)."""


class DeviceError(ProbekitError, RuntimeError):
    """A requested device is unknown or not available (e.g. CUDA on a CPU-only machine)."""


__all__ = [
    "ConfigError",
    "CorruptFileError",
    "DataError",
    "DeviceError",
    "KeyedValueError",
    "ModelLoadError",
    "NonFiniteError",
    "NotApplicableError",
    "PluginError",
    "ProbekitError",
    "StoreError",
]
