"""The grokking step of the modular-addition population as a censored survival time.

:func:`probekit.diagnosis.censoring_sensitivity` on the rows of each step of an existing
``markers.csv`` (step 300 = 25% of training, and the final step 1200): Cox hazards of the
crossing step (stratified by seed, given the two knobs and the train loss at that step),
Harrell's C, and the marker analysis over the censoring values ``censor_grid(1225)``. No
re-measuring.

Run::

    python scripts/modadd_crossing_survival.py docs/diagnosis/modadd/markers.csv \
        --censor 1225 --out docs/diagnosis/modadd/crossing_survival.json
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from probekit.diagnosis.statistics.survival import censor_grid, censoring_sensitivity
from probekit.report.blocks import strict_json

MARKERS = ("fourier_gini", "fourier_gini_logit", "weight_norm", "restricted_loss",
           "excluded_loss", "probe_accuracy", "circuit_efficiency")
KNOBS = ("train.weight_decay", "task.train_fraction")


def _num(v: str) -> float | None:
    return None if v in ("", "None", "nan") else float(v)


def main() -> None:
    """Print each step's summary and Cox rows; write every step's result to --out."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--censor", type=float, default=1225.0)
    ap.add_argument("--n-permutations", type=int, default=1000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with args.csv.open() as f:
        rows = list(csv.DictReader(f))
    crossing = {r["run"]: _num(r["id_step_0.9"]) for r in rows if r["final"] == "1"}
    out = {}
    for step in sorted({int(r["step"]) for r in rows}):
        sub = [r for r in rows if int(r["step"]) == step]
        table = {c: [_num(r[c]) for r in sub] for c in ("seed", *KNOBS, "train_loss", *MARKERS)}
        table["id_step_0.9"] = [crossing[r["run"]] for r in sub]
        res = censoring_sensitivity(table, "id_step_0.9", markers=MARKERS,
                                    censors=censor_grid(args.censor),
                                    covariates=(*KNOBS, "train_loss"), groups="seed",
                                    n_permutations=args.n_permutations,
                                    label=f"markers at step {step}")
        print(f"step {step}: {res!r}")
        for c in res.cox_records():
            print(f"  {c['marker']:20s} HR {c['hazard_ratio']:.2f} [{c['hr_low']:.2f}, "
                  f"{c['hr_high']:.2f}] p {c['p']:.2g} Holm {c['p_holm']:.2g}; Harrell C "
                  f"{c['concordance']:.2f} p {c['concordance_p']:.2g}; verdicts "
                  f"{res.verdicts(c['marker'])}")
        out[str(step)] = res.to_dict()
    if args.out is not None:
        args.out.write_text(json.dumps(strict_json(out), indent=1) + "\n")


if __name__ == "__main__":
    main()
