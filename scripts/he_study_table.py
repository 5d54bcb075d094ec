"""An & Du's HE population (``docs/he_study/paper/study.json``) as diagnosis tables.

Writes one ``markers.csv`` per population of the study (one row per model; no training, no
model), for ``probekit diagnose probes/diagnose_he_*.toml``:

* ``he_noise``: the noise sweep, noise 0..15 x 5 seeds (2-clause commands, 4 blocks, plain);
* ``he_coverage``: training on 1..k-clause commands, k = 1..4 x 5 seeds (no noise, 4 blocks);
* ``he_depth``: 1..10 blocks x 5 seeds (no noise, 2 clauses);
* ``he_regulariser``: plain (he_lambda 0) and HE-regularised (0.2) models at noise 0, 3, .., 15
  x 5 seeds (2 clauses, 4 blocks).

Columns: ``name, noise, train_clauses, n_layers, seed, he_lambda, id_accuracy`` (= the study's
``id_token_acc``), ``ood_accuracy`` (``ood_token_acc``, mean over OOD lengths 5..12),
``modifier_he, sequence_he, modifier_he_normalised, modifier_he_ridge``; the coverage table
also has ``coverage`` (k). ``train_clauses`` is the clause-count list as text (``[1,2]``). An
empty cell is "not applicable" (a 1-clause model has no sequence pairs).

With ``--variants``, also runs the noise-sweep diagnosis with each covariate set (noise and ID
accuracy, noise only, ID accuracy only, noise as a 16-level factor, none) and the regulariser
arm's (arm and noise, arm only, arm, noise and ID accuracy, none), writing ``variants.json``
beside each ``markers.csv``.

    python scripts/he_study_table.py                 # the four markers.csv
    python scripts/he_study_table.py --variants      # + variants.json (about 20 s)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "docs" / "he_study" / "paper" / "study.json"
OUT = ROOT / "docs" / "diagnosis"
COLUMNS = ("name", "noise", "train_clauses", "n_layers", "seed", "he_lambda", "id_accuracy",
           "ood_accuracy", "modifier_he", "sequence_he", "modifier_he_normalised",
           "modifier_he_ridge")
#: covariate sets of --variants per diagnosis file (name -> covariates)
VARIANTS = {
    "he_study": {"noise + id_accuracy": ["noise", "id_accuracy"], "noise": ["noise"],
                 "id_accuracy": ["id_accuracy"], "noise as a factor": ["noise_level"],
                 "none": []},
    "he_regulariser": {"he_lambda + noise": ["he_lambda", "noise"], "he_lambda": ["he_lambda"],
                       "he_lambda + noise + id_accuracy": ["he_lambda", "noise", "id_accuracy"],
                       "none": []},
}


def row(model: dict[str, Any]) -> dict[str, Any]:
    """One table row of a study model."""
    s = model["spec"]
    return {"name": model["name"], "noise": int(s["noise"]),
            "train_clauses": "[" + ",".join(str(c) for c in s["train_clauses"]) + "]",
            "n_layers": int(s["n_layers"]), "seed": int(s["seed"]),
            "he_lambda": float(s["he_lambda"]), "id_accuracy": model["id_token_acc"],
            "ood_accuracy": model["ood_token_acc"], "modifier_he": model["modifier_he"],
            "sequence_he": model["sequence_he"],
            "modifier_he_normalised": model["modifier_he_normalised"],
            "modifier_he_ridge": model["modifier_he_ridge"]}


def populations(models: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The four populations of the study, each sorted by its knob, then the seed."""
    rows = [row(m) for m in models]
    plain = [r for r in rows if r["he_lambda"] == 0.0]
    base = {"train_clauses": "[2]", "n_layers": 4}

    def at(r: dict[str, Any], **fixed: Any) -> bool:
        return all(r[k] == v for k, v in fixed.items())

    noise = sorted((r for r in plain if at(r, **base)), key=lambda r: (r["noise"], r["seed"]))
    coverage = []
    for r in plain:
        clauses = json.loads(r["train_clauses"])
        if at(r, noise=0, n_layers=4) and clauses == list(range(1, len(clauses) + 1)):
            coverage.append({**r, "coverage": len(clauses)})
    coverage.sort(key=lambda r: (r["coverage"], r["seed"]))
    depth = sorted((r for r in plain if at(r, noise=0, train_clauses="[2]")),
                   key=lambda r: (r["n_layers"], r["seed"]))
    reg_levels = {r["noise"] for r in rows if r["he_lambda"] > 0}
    regulariser = sorted((r for r in rows if at(r, **base) and r["noise"] in reg_levels),
                         key=lambda r: (r["he_lambda"], r["noise"], r["seed"]))
    return {"he_noise": noise, "he_coverage": coverage, "he_depth": depth,
            "he_regulariser": regulariser}


def write_tables(study: Path = STUDY, out: Path = OUT) -> dict[str, Path]:
    """Write ``out/<population>/markers.csv`` for each population; returns the paths."""
    from probekit.diagnosis.runner import _csv

    models = json.loads(study.read_text())["models"]
    paths = {}
    for name, rows in populations(models).items():
        cols = list(COLUMNS) + [c for c in rows[0] if c not in COLUMNS]
        table = {c: [r[c] for r in rows] for c in cols}
        path = out / name / "markers.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_csv(table))
        paths[name] = path
        print(f"{path.relative_to(ROOT)}: {len(rows)} models")  # noqa: T201
    return paths


def variants(name: str, out: Path) -> dict[str, Any]:
    """``probes/diagnose_<name>.toml`` once per covariate set of ``VARIANTS[name]``."""
    import dataclasses

    from probekit.diagnosis.runner import _csv
    from probekit.diagnosis.table_diagnosis import diagnose_table, load_table_diagnosis
    from probekit.diagnosis.table_io import read_marker_table

    spec = load_table_diagnosis(ROOT / "probes" / f"diagnose_{name}.toml")
    table = read_marker_table(spec.table)
    factor = out.parent / "markers_noise_factor.csv"  # noise as text: one-hot coded
    factor.write_text(_csv(table.assign(noise_level=[f"n{v:02d}" for v in table["noise"]])))
    result: dict[str, Any] = {}
    try:
        for label, covariates in VARIANTS[name].items():
            # no calibration section per variant: the file's own report has it (and it is
            # most of the run time); the records are the same
            d = dataclasses.replace(spec.diagnosis, covariates=tuple(covariates),
                                    calibration_simulations=0)
            res = diagnose_table(dataclasses.replace(spec, diagnosis=d,
                                                     table=factor if "noise_level" in covariates
                                                     else spec.table))
            a = res.analysis
            result[label] = {"covariates": covariates, "records": a.to_dict()["markers"],
                             "sentences": {s.marker: a.sentence(s.marker) for s in a.markers}}
            print(f"covariates {label}:")  # noqa: T201
            for s in a.markers:
                print(f"  {a.sentence(s.marker)}")  # noqa: T201
    finally:
        factor.unlink()
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=STUDY)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--variants", action="store_true",
                        help="also run the noise diagnosis per covariate set (variants.json)")
    args = parser.parse_args()
    write_tables(args.study, args.out)
    if args.variants:
        variants("he_study", args.out / "he_noise" / "variants.json")
        variants("he_regulariser", args.out / "he_regulariser" / "variants.json")


if __name__ == "__main__":
    main()
