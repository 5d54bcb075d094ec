"""Noise-sweep HE vs OOD accuracy in every unit: level means ([C]), single models, partials.

[C]'s R^2 (0.73 in the paper) is a polynomial fit of OOD token accuracy on modifier HE over the
16 noise-level means (5-seed means). Over level means the noise level drives both variables, so
this script puts beside it, from the per-model rows of a ``study.json`` written by
``scripts/he_study.py``:

* the per-model R^2 of the same polynomial fits (80 models);
* the partial correlation of modifier HE with OOD accuracy given the noise level (both
  regressed on the level, linearly; also with one dummy per level, i.e. within levels) and
  given ID token accuracy, with two-sided p-values (t test with ``n - 2 - k`` degrees of
  freedom for ``k`` covariates).

    python scripts/he_study_units.py docs/he_study/paper/study.json --sweep noise/ep15
    python scripts/he_study_units.py docs/he_study/study_noise16.json --sweep noise/st450
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from scripts.he_study_analysis import poly_r2, schedule_label, sweep_level


def _residual(y: np.ndarray, covariates: np.ndarray) -> np.ndarray:
    """``y`` minus its least-squares fit on ``[1, covariates]``."""
    Z = np.column_stack([np.ones(len(y)), covariates])
    beta, *_ = np.linalg.lstsq(Z, y, rcond=None)
    return y - Z @ beta


def partial_corr(x: np.ndarray, y: np.ndarray, covariates: np.ndarray) -> tuple[float, float, int]:
    """``(r, p, df)``: Pearson r of the residuals of ``x`` and ``y`` on ``covariates``."""
    covariates = covariates.reshape(len(x), -1)
    r = float(np.corrcoef(_residual(x, covariates), _residual(y, covariates))[0, 1])
    df = len(x) - 2 - covariates.shape[1]
    t = r * np.sqrt(df / max(1 - r * r, 1e-300))
    return r, float(2 * stats.t.sf(abs(t), df)), df


def units(rows: list[dict[str, Any]], sweep: str, schedule: str) -> dict[str, Any]:
    """Every unit's statistic for the plain models of ``sweep`` on ``schedule``."""
    sel = [r for r in rows if r["spec"]["he_lambda"] == 0 and schedule_label(r["spec"]) == schedule
           and sweep_level(r["spec"], sweep) is not None]
    level = np.array([sweep_level(r["spec"], sweep) for r in sel], dtype=float)
    he = np.array([r["modifier_he"] for r in sel])
    ood = np.array([r["ood_token_acc"] for r in sel])
    idacc = np.array([r["id_token_acc"] for r in sel])
    levels = np.unique(level)
    he_m = np.array([he[level == v].mean() for v in levels])
    ood_m = np.array([ood[level == v].mean() for v in levels])
    dummies = (level[:, None] == levels[None, 1:]).astype(float)
    out: dict[str, Any] = {
        "n_models": len(sel), "n_levels": len(levels),
        "r2_level_means": [poly_r2(he_m, ood_m, k) for k in (1, 2, 3)],
        "r2_models": [poly_r2(he, ood, k) for k in (1, 2, 3)],
        "pearson_models": float(np.corrcoef(he, ood)[0, 1]),
    }
    for name, cov in (("noise_linear", level), ("noise_levels", dummies), ("id_acc", idacc),
                      ("noise_linear_and_id_acc", np.column_stack([level, idacc]))):
        r, p, df = partial_corr(he, ood, cov)
        out[f"partial_{name}"] = {"r": r, "p": p, "df": df}
    return out


def main(argv: list[str] | None = None) -> int:
    """Print (and optionally write) the statistics of one study file's sweep."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", help="study.json of scripts/he_study.py")
    ap.add_argument("--sweep", default="noise/ep15", help="SWEEP/SCHEDULE, e.g. noise/st450")
    ap.add_argument("--json", default=None, help="also write the numbers here")
    args = ap.parse_args(argv)
    sweep, schedule = args.sweep.split("/")
    rows = json.loads(Path(args.study).read_text())["models"]
    out = units(rows, sweep, schedule)
    print(f"{args.study} {args.sweep}: {out['n_models']} models, {out['n_levels']} levels")
    print("R^2 of OOD on modifier HE, level means (deg 1/2/3): "
          + " / ".join(f"{v:.3f}" for v in out["r2_level_means"]))
    print("R^2 of OOD on modifier HE, single models (deg 1/2/3): "
          + " / ".join(f"{v:.3f}" for v in out["r2_models"]))
    for key, v in out.items():
        if key.startswith("partial_"):
            print(f"{key}: r = {v['r']:+.3f}, p = {v['p']:.2g} (df {v['df']})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
