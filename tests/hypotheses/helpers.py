"""A stand-in AnalysisContext for measurement kinds: the attributes kinds read, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probekit.executor import InProcessExecutor
from probekit.hypotheses.spec import Claim
from probekit.suites.data import Examples
from probekit.suites.spec import StatsSpec


@dataclass
class FakeData:
    label: str = "label"
    prompt_only: bool = True


@dataclass
class FakeSuite:
    data: FakeData = field(default_factory=FakeData)
    source: str = "."

    def resolve(self, relative):
        from pathlib import Path

        path = Path(relative)
        return path if path.is_absolute() else Path(self.source).parent / path


@dataclass
class FakeContext:
    """``model``, ``examples``, ``activations(sites)``, ``stats``, ``executor``, ``suite.data``."""

    model: Any = None
    examples: Examples | None = None
    acts: dict = field(default_factory=dict)
    stats: StatsSpec = field(default_factory=StatsSpec)
    executor: Any = field(default_factory=lambda: InProcessExecutor(progress=False))
    suite: FakeSuite = field(default_factory=FakeSuite)

    def activations(self, sites):
        return {s: self.acts[s] for s in sites}


def claim(compare: str, threshold: tuple[float, ...], measure: str = "x") -> Claim:
    return Claim(name="c", measure=measure, compare=compare, threshold=threshold, spec=None)


def examples(tokens, columns, splits) -> Examples:
    return Examples(tokens=tokens, columns=columns,
                    splits={k: np.asarray(v) for k, v in splits.items()})
