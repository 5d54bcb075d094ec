"""The depth population given the seed too: the seed draws each model's training and OOD commands.

Usage: ``python docs/diagnosis/scan_depth/given_seed.py docs/diagnosis/scan_depth/markers.csv``

Seed as a categorical covariate (one-hot); each model its own leave-out group.
"""

import csv
import sys

from probekit.diagnosis import marker_analysis

with open(sys.argv[1], newline="") as handle:
    rows = list(csv.DictReader(handle))
markers = ["sequence_he_separate", "capacity", "manifold_dimension", "cka_depth4"]
table = {c: [float(r[c]) for r in rows]
         for c in ["model.n_layers", "id_accuracy", "ood:ood_len", *markers]}
table["seed_level"] = [f"s{r['seed']}" for r in rows]
res = marker_analysis(table, "ood:ood_len", markers=markers,
                      covariates=["model.n_layers", "id_accuracy", "seed_level"], groups=None,
                      n_permutations=1000, n_bootstrap=1000, seed=0)
print(res.covariate_terms, res.warnings)
for m in markers:
    print("-", res.sentence(m))
