"""The grokking step as the outcome of the modular-addition population (issue 32, population 2).

``probekit diagnose`` takes the crossing step as its outcome with ``[diagnosis] outcome =
"id_step_0.9"`` and ``censor = "next_eval"``; this script reruns the same path
(:func:`probekit.diagnosis.censor_crossing`, then :func:`probekit.diagnosis.early_warning`) on an
existing ``markers.csv`` with two covariate sets, without re-measuring. The crossing step is
right-censored: a run that never crosses gets ``steps + eval_every`` (one evaluation past the
end), which keeps the rank order (Spearman) exact and makes the linear statistics (partial r,
delta R^2) approximate for those runs. Two covariate sets: the knobs + the train loss at that step
(the issue's question), and the same plus the held-out accuracy at that step (what grokking so far
already shows).

Run (after ``probekit diagnose probes/diagnose_modadd.toml --out docs/diagnosis/modadd``)::

    python scripts/modadd_crossing_analysis.py docs/diagnosis/modadd/markers.csv \
        --censor 1225 --out docs/diagnosis/modadd/crossing.json
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

from probekit.diagnosis.statistics.early import early_warning
from probekit.diagnosis.statistics.survival import censor_crossing

MARKERS = ("fourier_gini", "fourier_gini_logit", "weight_norm", "restricted_loss",
           "excluded_loss", "probe_accuracy", "circuit_efficiency")
KNOBS = ("train.weight_decay", "task.train_fraction")


def _num(v: str) -> float | None:
    return None if v in ("", "None", "nan") else float(v)


def load(path: Path, crossing: str, censor: float) -> dict[str, list[Any]]:
    """The long-form table of ``markers.csv``, its crossing step censored at ``censor``.

    Adds ``final_<crossing>`` (:func:`probekit.diagnosis.censor_crossing`) and ``censored``
    (1 on the rows of runs that never cross).
    """
    with path.open() as f:
        rows = list(csv.DictReader(f))
    cols = ["step", "seed", *KNOBS, "train_loss", "id_accuracy", *MARKERS]
    table: dict[str, list[Any]] = {c: [_num(r[c]) for r in rows] for c in cols}
    table["run"] = [r["run"] for r in rows]
    table["final"] = [int(r["final"]) for r in rows]
    table[crossing] = [_num(r[crossing]) for r in rows]
    out = censor_crossing(table, crossing, censor).table
    out["censored"] = [int(v is None) for v in table[crossing]]
    return out


def main() -> None:
    """Print every step's sentences and write the per-step records to --out."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--crossing", default="id_step_0.9")
    ap.add_argument("--censor", type=float, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    table = load(args.csv, args.crossing, args.censor)
    result: dict[str, Any] = {"outcome": args.crossing, "censor": args.censor,
                              "n_censored_runs": sum(c for c, f in zip(table["censored"], table["final"],
                                                                       strict=True) if f)}
    for label, extra in (("knobs+train_loss", ()), ("knobs+train_loss+id_accuracy", ("id_accuracy",))):
        ew = early_warning(table, f"final_{args.crossing}", step="step", markers=MARKERS,
                           covariates=(*KNOBS, "train_loss", *extra), groups="seed",
                           n_permutations=1000, n_bootstrap=1000, seed=0)
        result[label] = ew.to_dict()
        for s, a in zip(ew.steps, ew.analyses, strict=True):
            print(f"== covariates {label}, step {s:g}")
            for m in MARKERS:
                print("  ", a.sentence(m))
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
