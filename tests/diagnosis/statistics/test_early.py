"""Early warning: per-step analyses equal marker_analysis on that step; earliest step found."""

import numpy as np
import pytest

from probekit.diagnosis import early_warning, marker_analysis
from probekit.errors import DataError


def series(seed: int = 0) -> dict[str, list]:
    """6 seeds x 5 weight decays x 3 steps; the marker carries the final outcome from step 2."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(6):
        for wd in np.linspace(0, 1, 5):
            hidden = rng.normal()
            final = wd + hidden + 0.2 * rng.normal()
            for step in (100, 200, 300):
                strength = {100: 0.0, 200: 1.0, 300: 1.0}[step]
                rows.append({"seed": s, "wd": wd, "step": step, "final": final,
                             "train_acc": min(1.0, step / 300) * (0.5 + 0.1 * wd) + 0.01 * rng.normal(),
                             "gini": strength * hidden + 0.3 * rng.normal(),
                             "noise": rng.normal()})
    return {k: [r[k] for r in rows] for k in rows[0]}


def test_early_warning_per_step_and_earliest():
    t = series()
    ew = early_warning(t, "final", step="step", markers=["gini", "noise"],
                       covariates=["wd", "train_acc"], groups="seed", n_permutations=300)
    assert ew.steps == (100, 200, 300)
    assert ew.earliest == {"gini": 200, "noise": None}
    assert ew.sentence("gini") == "gini first adds beyond wd, train_acc at step 200 (steps 100, 200, 300)."
    sub = {k: [v for v, st in zip(col, t["step"], strict=True) if st == 200] for k, col in t.items()}
    ref = marker_analysis(sub, "final", markers=["gini", "noise"], covariates=["wd", "train_acc"],
                          groups="seed", n_permutations=300)
    assert ew.analyses[1].to_records() == ref.to_records()
    recs = ew.to_records()
    assert len(recs) == 6 and recs[2]["step"] == 200 and recs[2]["marker"] == "gini"


def test_a_step_with_too_few_groups_is_named():
    t = series()
    t["seed"] = [s if st != 300 else s % 2 for s, st in zip(t["seed"], t["step"], strict=True)]
    with pytest.raises(DataError, match=r"step step=300: leave-one-group-out needs >= 3 groups"):
        early_warning(t, "final", step="step", markers=["gini"], groups="seed", n_permutations=100)
