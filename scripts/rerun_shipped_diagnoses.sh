#!/usr/bin/env bash
# Re-derive every shipped diagnosis report in docs/diagnosis from its saved table (no training):
# the check behind "no figure in README or docs differs from a rerun". About 8 CPU-minutes.
# Then `git diff docs/diagnosis` shows every figure a code change moved.
# Each folder gets report.json, report.html, markers.csv (+ its .sha256) and stdout.txt.
# Usage: bash scripts/rerun_shipped_diagnoses.sh [NAME ...]   (names = folders of docs/diagnosis)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg
run() {  # NAME TOML [--table CSV]
  local name=$1 toml=$2; shift 2
  echo "== $name ($toml)"
  $PY -m probekit.cli diagnose "$toml" "$@" --out "docs/diagnosis/$name" --quiet \
    | tee "docs/diagnosis/$name/stdout.txt"
}
want() { [ ${#NAMES[@]} -eq 0 ] || [[ " ${NAMES[*]} " == *" $1 "* ]]; }
NAMES=("$@")
want he_noise && run he_noise probes/diagnose_he_study.toml
want he_coverage && run he_coverage probes/diagnose_he_coverage.toml
want he_depth && run he_depth probes/diagnose_he_depth.toml
want he_regulariser && run he_regulariser probes/diagnose_he_regulariser.toml
want scan_causal && run scan_causal probes/diagnose_scan_causal.toml --table docs/diagnosis/scan_causal/markers.csv
want scan_noise_power && run scan_noise_power probes/diagnose_scan_noise_power.toml --table docs/diagnosis/scan_noise_power/markers.csv
want kg_composition && run kg_composition probes/diagnose_kg_composition.toml --table docs/diagnosis/kg_composition/markers.csv
want kg_composition && run kg_composition/id probes/diagnose_kg_composition_id.toml --table docs/diagnosis/kg_composition/id/markers.csv
want modadd && run modadd probes/diagnose_modadd.toml --table docs/diagnosis/modadd/markers.csv
want modadd_causal && run modadd_causal probes/diagnose_modadd_causal.toml
want modadd_necessity && run modadd_necessity probes/diagnose_modadd_necessity.toml --table docs/diagnosis/modadd_necessity/markers.csv
want modadd_causal_crossing && run modadd_causal_crossing probes/diagnose_modadd_causal_crossing.toml
want scan_coverage && run scan_coverage probes/diagnose_scan_coverage.toml --table docs/diagnosis/scan_coverage/markers.csv
want scan_depth && run scan_depth probes/diagnose_scan_depth.toml --table docs/diagnosis/scan_depth/markers.csv
want scan_noise && run scan_noise probes/diagnose_scan_noise.toml --table docs/diagnosis/scan_noise/markers.csv
if want compare_he_regulariser; then  # two arms of one table side by side (docs/diagnosis/compare_he_regulariser)
  echo "== compare_he_regulariser"
  c=docs/diagnosis/compare_he_regulariser
  $PY -m probekit.cli diagnose $c/plain.toml $c/regularised.toml --out $c --force --quiet | tee $c/stdout.txt
fi
if want modadd; then  # the grokking step as the outcome (censored), and its survival check
  $PY scripts/modadd_crossing_analysis.py docs/diagnosis/modadd/markers.csv --censor 1225 \
    --out docs/diagnosis/modadd/crossing.json
  $PY scripts/modadd_crossing_survival.py docs/diagnosis/modadd/markers.csv --censor 1225 \
    --out docs/diagnosis/modadd/crossing_survival.json
fi
want he_noise && $PY scripts/he_study_table.py --variants > /dev/null   # variants.json (HE study)
want scan_depth && $PY docs/diagnosis/scan_depth/given_seed.py docs/diagnosis/scan_depth/markers.csv \
  > docs/diagnosis/scan_depth/given_seed.txt
want scan_coverage && $PY docs/diagnosis/scan_coverage/k2_to_4.py \
  docs/diagnosis/scan_coverage/markers.csv > docs/diagnosis/scan_coverage/k2_to_4.txt
$PY scripts/diagnosis_findings.py     # docs/diagnosis/FINDINGS.md, the page the docs quote
echo "done"
