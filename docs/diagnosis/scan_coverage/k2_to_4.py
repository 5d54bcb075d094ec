"""Re-analyse the coverage population on the k >= 2 models only (every marker defined there).

Usage: ``python docs/diagnosis/scan_coverage/k2_to_4.py docs/diagnosis/scan_coverage/markers.csv``
"""

import csv
import sys

from probekit.diagnosis import marker_analysis

COLUMNS = ["len(task.train_clauses)", "seed", "id_accuracy", "ood:ood_len", "modifier_he",
           "modifier_he_normalised", "sequence_he", "sequence_he_normalised",
           "modifier_he_separate", "sequence_he_separate", "probe_primitive_b0",
           "probe_primitive_b1", "probe_primitive_b2", "probe_primitive_b3", "capacity",
           "manifold_dimension", "cka_k2", "weight_norm"]


def number_or_none(value: str) -> float | None:
    """The cell as a float; None for an empty or non-numeric cell (a marker undefined there)."""
    try:
        return float(value)
    except ValueError:
        return None


with open(sys.argv[1], newline="") as handle:
    rows = [r for r in csv.DictReader(handle) if r["len(task.train_clauses)"] != "1"]
table = {c: [number_or_none(r[c]) for r in rows] for c in COLUMNS}
markers = COLUMNS[4:]
res = marker_analysis(table, "ood:ood_len", markers=markers,
                      covariates=["len(task.train_clauses)", "id_accuracy"], groups="seed",
                      n_permutations=1000, n_bootstrap=1000, seed=0)
print(res.n_models, res.n_groups, res.warnings)
for m in markers:
    print("-", res.sentence(m))
