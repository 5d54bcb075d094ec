import csv

import pytest

from scripts import modadd_crossing_analysis as S


def _write(path, rows):
    cols = ["run", "final", "step", "seed", *S.KNOBS, "train_loss", "id_accuracy", *S.MARKERS, "id_step_0.9"]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, 0.5) for c in cols})


def test_load_censors_runs_that_never_cross(tmp_path):
    path = tmp_path / "markers.csv"
    _write(path, [{"run": "a", "final": 0, "step": 300, "id_step_0.9": 450},
                  {"run": "b", "final": 0, "step": 300, "id_step_0.9": ""},
                  {"run": "a", "final": 1, "step": 1200, "id_step_0.9": 450},
                  {"run": "b", "final": 1, "step": 1200, "id_step_0.9": ""}])
    t = S.load(path, "id_step_0.9", 1225.0)
    assert t["id_step_0.9"] == [450.0, 1225.0, 450.0, 1225.0]
    assert t["final_id_step_0.9"] == [450.0, 1225.0, 450.0, 1225.0]
    assert t["censored"] == [0, 1, 0, 1]
    assert t["step"] == [300.0, 300.0, 1200.0, 1200.0]
    assert t["probe_accuracy"] == [pytest.approx(0.5)] * 4
