"""When an outcome cannot rank the models: the report's degenerate-outcome rule.

An outcome is degenerate when it barely varies over the analysed models, so that no marker can
be said to predict it (Jiang et al. 2020 rank models by a generalization gap that must vary):

* one value on at least ``max_tied_share`` (80 %) of the models (the analysis's own
  ``degenerate_outcome`` flag tests the same), or
* a proportion (every value in [0, 1], e.g. an accuracy) whose range over the models is below
  ``min_range`` (0.05: five percentage points, a handful of examples of a typical split), so a
  "ranking" orders evaluation noise (e.g. OOD accuracies of 0 to 0.03).

The report then warns and gives no verdict; the statistics stay, for the record.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from probekit.errors import ConfigError

__all__ = ["DegenerateRule", "degenerate_outcome"]


@dataclass(frozen=True)
class DegenerateRule:
    """The bounds of :func:`degenerate_outcome`.

    Attributes:
        min_range: a proportion outcome (values in [0, 1]) with a smaller range is degenerate;
            in (0, 1).
        max_tied_share: an outcome with one value on at least this share of the models is
            degenerate; in (0, 1].
    """

    min_range: float = 0.05
    max_tied_share: float = 0.8

    def __post_init__(self) -> None:
        """Check the bounds."""
        if not 0.0 < self.min_range < 1.0:
            raise ConfigError(f"DegenerateRule(min_range={self.min_range}): pass a range in "
                              "(0, 1) (a difference of proportions)")
        if not 0.0 < self.max_tied_share <= 1.0:
            raise ConfigError(f"DegenerateRule(max_tied_share={self.max_tied_share}): pass a "
                              "share in (0, 1]")


def degenerate_outcome(outcome: str, values: Iterable[float | None],
                       flags: Sequence[str] = (), rule: DegenerateRule = DegenerateRule()
                       ) -> str | None:
    """Why ``outcome`` cannot rank the models (a sentence), or None when it can.

    ``values``: the outcome over the analysed models (missing values are skipped); ``flags``:
    the analysis's flags (any ``degenerate_outcome(...)`` flag makes the outcome degenerate).
    """
    ys = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    flagged = next((f for f in flags if f.startswith("degenerate_outcome")), None)
    if not ys:
        return None if flagged is None else f"the outcome {outcome} is degenerate ({flagged})."
    n = len(ys)
    value, count = Counter(ys).most_common(1)[0]
    if count / n >= rule.max_tied_share:
        return (f"the outcome {outcome} is degenerate: {count} of the {n} analysed models "
                f"({count / n:.0%}) share the value {value:g} (the rule: one value on "
                f">= {rule.max_tied_share:.0%} of the models).")
    low, high = min(ys), max(ys)
    if low >= 0.0 and high <= 1.0 and high - low < rule.min_range:
        return (f"the outcome {outcome} is near-constant: over the {n} analysed models it "
                f"ranges {low:.3g} to {high:.3g} (range {high - low:.3g}, below the "
                f"{rule.min_range:g} a proportion needs to order the models beyond "
                "evaluation noise).")
    if flagged is not None:
        return f"the outcome {outcome} is degenerate ({flagged})."
    return None
