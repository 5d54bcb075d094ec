"""How a report prints a number: one p-value format, plain tick labels.

* :func:`format_p`: 3 significant digits, and ``"< 0.001"`` at the floor of a permutation p
  (``(1 + k) / (1 + B)`` is never below ``1 / (1 + B)``, so a p at that floor says only
  "below the next round number": the floor comes from the permutation count ``B``);
* :func:`plain_number`: a tick label written out (``1250``, ``0.0005``), never ``1.25e+03``.
"""

from __future__ import annotations

import math

__all__ = ["format_p", "p_floor", "plain_number"]


def p_floor(n_permutations: int | None) -> float | None:
    """The smallest permutation p with ``n_permutations`` resamples, ``1 / (1 + B)``; None if unknown."""
    if n_permutations is None or n_permutations < 1:
        return None
    return 1.0 / (1.0 + n_permutations)


def _round_up(v: float) -> float:
    """The first 1-significant-digit number >= ``v`` (0.000999 -> 0.001, 4.9998e-5 -> 5e-5)."""
    exp = math.floor(math.log10(v))
    digit = math.ceil(round(v / 10.0 ** exp, 9))
    return digit * 10.0 ** exp


def format_p(p: float | None, floor: float | None = None) -> str:
    """``p`` in 3 significant digits (``0.0123``, ``0.5``, ``1``); ``"< 0.001"`` at ``floor``.

    ``floor``: the smallest p the test can give (:func:`p_floor`); a p within 1e-9 (relative)
    of it prints as ``"< X"`` with ``X`` the floor rounded up to one significant digit. A
    missing or non-finite p prints ``"-"``.
    """
    if p is None or not math.isfinite(p):
        return "-"
    if floor is not None and floor > 0 and p <= floor * (1 + 1e-9):
        return f"< {plain_number(_round_up(floor))}"
    return plain_number(float(f"{p:.3g}"))


def plain_number(v: float, digits: int = 3) -> str:
    """``v`` in ``digits`` significant digits written positionally (no exponent, no ``-0``)."""
    if not math.isfinite(v):
        return "-" if math.isnan(v) else ("-inf" if v < 0 else "inf")
    if v == 0:
        return "0"
    rounded = float(f"{v:.{digits}g}")
    exp = math.floor(math.log10(abs(rounded)))
    decimals = max(digits - 1 - exp, 0)
    text = f"{rounded:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if float(text) == 0 else text
