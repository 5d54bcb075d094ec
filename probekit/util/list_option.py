"""One rule for list options: each value given once and, where a range is known, inside it.

A list option (``--layers 0,1``, ``[[patching]] layers``, ``edge_ks``, ``ood_splits``, the
similarity ``sites``) names things to compute, one result row each. A value given twice
computes the same row twice (duplicate report rows, a family of tests counted one too many in a
Holm correction); a value outside the range (a block the model does not have) fails deep inside
a hook or a tensor index. :func:`check_list_option` refuses both with one line naming the option,
the value and the valid range; the declared spec fields use the same test through
:class:`probekit.util.constraints.Distinct` (:func:`repeated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["check_list_option", "check_top_k", "repeated"]


def repeated(values: Iterable[Any]) -> list[Any]:
    """The values given more than once, in order of their second occurrence (each once)."""
    seen: set[str] = set()
    out: list[Any] = []
    for v in values:
        key = repr(v)
        if key in seen and v not in out:
            out.append(v)
        seen.add(key)
    return out


def check_top_k(k: Any, n: int, *, what: str) -> int:
    """How many of ``n`` items to keep: an int ``1 <= k <= n``.

    ``what`` names the items (``"the non-constant frequencies"``). Light on purpose: a spec
    checks its ``k`` with it when the file loads, the method it feeds checks the same rule.

    Raises:
        ConfigError: ``k=0: choose 1 <= k <= 26 (the non-constant frequencies)``.
    """
    import numbers

    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= n:
        raise ConfigError(f"k={k}: choose 1 <= k <= {n} ({what})")
    return int(k)


def check_list_option(option: str, values: Sequence[Any], *, low: int | None = None,
                      high: int | None = None, what: str = "value", note: str = "") -> list[Any]:
    """``values`` as a list, refused when a value repeats or an int lies outside ``low .. high - 1``.

    Args:
        option: the option as the user wrote it (``"--layers"``, ``"[[patching]] layers"``).
        values: the given values.
        low: the smallest valid int value (``None``: unbounded).
        high: one past the largest valid int value, so the range is ``[low, high)``.
        what: what one value is, for the message (``"block index"``).
        note: why the range is what it is (``"the model has 2 blocks"``).

    Raises:
        ConfigError: ``--layers [0, 0]: block index 0 is given twice; give each block index
            once`` or ``--layers [3]: block index 3 is outside 0..1 (the model has 2 blocks)``.
    """
    given = list(values)
    twice = repeated(given)
    if twice:
        raise ConfigError(f"{option} {given}: {what} {twice[0]!r} is given twice; give each "
                          f"{what} once")
    if low is not None or high is not None:
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high - 1)
        bad = [v for v in given if (low is not None and v < low) or (high is not None and v >= high)]
        if bad:
            if high is not None and low is not None and high <= low:
                why = f" ({note})" if note else ""
                raise ConfigError(f"{option} {given}: no {what} is valid, the range {low}..{high - 1} "
                                  f"is empty{why}")
            why = f" ({note})" if note else ""
            raise ConfigError(f"{option} {given}: {what} {bad[0]!r} is outside {lo}..{hi}{why}; "
                              f"give values in {lo}..{hi}")
    return given
