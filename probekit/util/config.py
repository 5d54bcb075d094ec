"""Refuse unknown keys in configs and specs with the valid keys and the closest matches."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..errors import ConfigError

__all__ = ["check_keys", "close_match_hint", "unknown_key_message"]


def close_match_hint(key: str, valid: Iterable[str]) -> str:
    """``" (did you mean 'steps'?)"`` for the closest valid key (difflib), or ``""`` if none is close."""
    close = difflib.get_close_matches(key, sorted(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key_message(unknown: Iterable[str], valid: Iterable[str], *, what: str) -> str:
    """``"unknown <what> key 'stpes' (did you mean 'steps'?); valid keys are [...]"`` for ``unknown``."""
    bad = sorted(unknown)
    ok = sorted(valid)
    hints = {k: difflib.get_close_matches(k, ok, n=1) for k in bad}
    close = [f"{m[0]!r}" + (f" for {k!r}" if len(bad) > 1 else "") for k, m in hints.items() if m]
    noun = "key" if len(bad) == 1 else "keys"
    shown = repr(bad[0]) if len(bad) == 1 else repr(bad)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown {what} {noun} {shown}{hint}; valid keys are {ok}"


def check_keys(given: Iterable[str], valid: Iterable[str], *, what: str) -> None:
    """Raise :class:`~probekit.errors.ConfigError` if ``given`` has keys outside ``valid``.

    Args:
        given: keys supplied by the user (a dict, TOML table, keyword overrides).
        valid: the accepted keys, e.g. ``{f.name for f in dataclasses.fields(cls)}``.
        what: what the keys belong to, for the message (``"TrainConfig"``, ``"[probe]"``).
    """
    valid = set(valid)
    unknown = set(given) - valid
    if unknown:
        raise ConfigError(unknown_key_message(unknown, valid, what=what))
