"""probekit diagnose on an existing table: [population] table = FILE, or FILE --table PATH."""

from __future__ import annotations

import numpy as np
import pytest

from probekit.cli import main
from probekit.diagnosis import marker_analysis
from probekit.diagnosis.runner import _csv
from probekit.diagnosis.table_diagnosis import diagnose_table, load_table_diagnosis
from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError


def _population(path, seed=0):
    """Planted: 'planted' adds beyond the knob; 'tracks' only follows it; 12 x 3 seeds x 2 arms."""
    rng = np.random.default_rng(seed)
    knob = np.repeat(np.arange(6.0), 6)
    seed_col = np.tile(np.arange(3), 12)
    arm = np.tile(["a", "a", "a", "b", "b", "b"], 6)
    z = rng.normal(size=36)
    y = -0.5 * knob + z + 0.3 * rng.normal(size=36)
    table = {"name": [f"m{i}" for i in range(36)], "knob": knob.astype(int).tolist(),
             "seed": seed_col.tolist(), "arm": arm.tolist(), "id_accuracy": (0.5 + 0.01 * rng.normal(size=36)).tolist(),
             "ood": y.tolist(), "planted": (z + 0.2 * rng.normal(size=36)).tolist(),
             "tracks": (knob + 0.3 * rng.normal(size=36)).tolist(),
             "sparse": [None if i % 9 == 0 else float(v) for i, v in enumerate(rng.normal(size=36))]}
    path.write_text(_csv(table))
    return table


def _spec(tmp_path, extra="", diagnosis='outcome = "ood"\n'):
    text = ('[suite]\nname = "planted"\n\n[population]\ntable = "markers.csv"\n' + extra
            + "\n[diagnosis]\n" + diagnosis + "n_permutations = 300\n")
    path = tmp_path / "diag.toml"
    path.write_text(text)
    return path


def test_table_diagnosis_equals_marker_analysis(tmp_path):
    table = _population(tmp_path / "markers.csv")
    res = diagnose_table(_spec(tmp_path, 'where = { arm = "a" }\nknobs = ["knob"]\n'))
    keep = [i for i, a in enumerate(table["arm"]) if a == "a"]
    assert len(res.table["name"]) == 18 and res.settings.knobs == ("knob",)
    assert res.settings.covariates == ("knob", "id_accuracy") and res.settings.groups == "seed"
    assert list(res.markers) == ["planted", "tracks", "sparse"]  # the numeric columns left
    # no knobs named: a numeric column is a knob only as a covariate; text 'arm' is constant here
    guess = diagnose_table(_spec(tmp_path, 'where = { arm = "a" }\n',
                                 'outcome = "ood"\ncovariates = ["knob"]\n'))
    assert guess.settings.knobs == ("knob",) and list(guess.markers) == list(res.markers)
    sub = {k: [v[i] for i in keep] for k, v in table.items()}
    ref = marker_analysis(sub, "ood", markers=["planted", "tracks", "sparse"],
                          covariates=["knob", "id_accuracy"], groups="seed", n_permutations=300)
    for a, b in zip(res.analysis.to_records(), ref.to_records(), strict=True):
        # the runner's few-groups flag also states the CI coverage its calibration measured
        fa, fb = a.pop("flags"), b.pop("flags")
        assert [f.split(";")[0].rstrip(")") for f in fa] == [f.rstrip(")") for f in fb]
        assert all("CI coverage measured on this design" in f for f in fa if f.startswith("few_"))
        # the report's MDE is simulated for its test (probekit.diagnosis.mde); the formula's
        # value marker_analysis gives is what it replaced, recorded under diagnosis.power
        power = next(d for d in res.extras["power"]["designs"] if a["marker"] in d["markers"])
        assert a.pop("mde_partial_r") == power["mde"]
        assert power["classical_mde"] == pytest.approx(b.pop("mde_partial_r"), rel=1e-9)
        assert a == pytest.approx(b, nan_ok=True)
    assert res.analysis["sparse"].n_missing == 2  # empty cells: not applicable to those models


def test_planted_verdicts_from_the_file(tmp_path):
    _population(tmp_path / "markers.csv")
    res = diagnose_table(_spec(tmp_path, diagnosis='outcome = "ood"\ncovariates = ["knob"]\n'
                                                   'markers = ["planted", "tracks"]\n'))
    assert res.analysis["planted"].verdict == "adds_beyond_covariates"
    # 'tracks' follows the knob only: marginal rejects, partial does not; with 36 models over 3
    # seeds its partial-r CI cannot be shown inside +-0.2, so "explained" is not claimed
    tracks = res.analysis["tracks"]
    assert tracks.p_holm <= 0.05 and tracks.partial_p_holm > 0.05
    assert tracks.partial_low < 0 < tracks.partial_high
    assert tracks.verdict == "inconclusive" and tracks.flags[0].startswith("few_groups(G=3; ")


@pytest.mark.parametrize(("diagnosis", "extra", "match"), [
    ('outcome = "ood"\ncovariates = ["nope"]\n', "", r"diag\.toml:\d+: \[diagnosis\] covariates: covariate 'nope' is not a column"),
    ('outcome = "oood"\n', "", r"diag\.toml:\d+: \[diagnosis\] outcome: the outcome 'oood' is not a column"),
    ('outcome = "ood"\nmarkers = ["planted", "gone"]\n', "", r"marker 'gone' is not a column"),
    ('outcome = "ood"\n', 'where = { arm = "c" }\n', r"\[population\] where: no row"),
    ('outcome = "ood"\ncrossing = 0.9\n', "", r"\[diagnosis\] crossing: only a computed population"),
    ('outcome = "ood"\ncensor = 1225\n', "", r"\[diagnosis\] censor: only a crossing-step outcome"),
])
def test_bad_columns_name_the_file_line(tmp_path, diagnosis, extra, match):
    _population(tmp_path / "markers.csv")
    with pytest.raises(ConfigError, match=match):
        diagnose_table(load_table_diagnosis(_spec(tmp_path, extra, diagnosis)))


def test_cli_table_file_and_table_flag(tmp_path, capsys):
    _population(tmp_path / "markers.csv")
    spec = _spec(tmp_path, diagnosis='outcome = "ood"\ncovariates = ["knob"]\n')
    assert main(["diagnose", str(spec), "--check"]) == 0
    assert "table diagnosis is valid" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["diagnose", str(spec), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {"markers.csv", "report.json", "report.html"}
    assert "planted: Spearman" in capsys.readouterr().out
    # --table: the same question on another table (a missing one: one line, exit 2)
    assert main(["diagnose", str(spec), "--table", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv not found" in capsys.readouterr().err
    # --out into the input's folder with a where filter would overwrite the input table
    spec = _spec(tmp_path, 'where = { arm = "a" }\n', 'outcome = "ood"\ncovariates = ["knob"]\n')
    assert main(["diagnose", str(spec), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err  # refused before the table is read: not probekit's folder
    assert "was not written by probekit" in err or "would overwrite the input table" in err


def test_where_choosing_early_checkpoints_analyses_them_as_the_models():
    """``where = { step = 300 }`` on a table of (step 300, final) rows per run: the 216 early rows
    are the models (none is flagged final), and the mediation of the shipped causal file runs."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    res = diagnose_table(root / "probes" / "diagnose_modadd_causal.toml")
    assert len(res.table["step"]) == 216 and set(res.table["step"]) == {300}
    stats = {s.marker: s for s in res.analysis.markers}
    assert set(stats) == {"fourier_gini", "restricted_loss"} and stats["fourier_gini"].n == 216
    causal = res.extras["causal"]
    assert [r["marker"] for r in causal["records"]] == ["fourier_gini", "restricted_loss"]


def test_shipped_crossing_mediation_reruns_its_report():
    """The shipped causal population with the censored grokking step as the outcome
    (probes/diagnose_modadd_causal_crossing.toml) reproduces docs/diagnosis/modadd_causal_crossing:
    verdicts, partial r, the mediation, the Cox hazard ratios and the censoring curve."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    res = diagnose_table(root / "probes" / "diagnose_modadd_causal_crossing.toml")
    shipped = json.loads((root / "docs/diagnosis/modadd_causal_crossing/report.json").read_text())
    d = shipped["diagnosis"]
    ref = {r["marker"]: r for r in d["analysis"]["markers"]}
    for s in res.analysis.markers:
        assert s.verdict == ref[s.marker]["verdict"]
        assert s.partial_r == pytest.approx(ref[s.marker]["partial_r"], abs=1e-9)
    assert res.analysis["fourier_gini"].verdict == "adds_beyond_covariates"
    assert res.extras["survival"]["n_censored"] == 58
    for a, b in zip(res.extras["survival"]["cox"], d["survival"]["cox"], strict=True):
        assert a["hazard_ratio"] == pytest.approx(b["hazard_ratio"], rel=1e-9)
    assert {c["verdict"] for c in res.extras["survival"]["curve"] if c["marker"] == "fourier_gini"} \
        == {"adds_beyond_covariates"}  # stable over the censoring values 1225..2450
    for a, b in zip(res.extras["causal"]["records"], d["causal"]["records"], strict=True):
        assert a["mediation_indirect"] == pytest.approx(b["mediation_indirect"], rel=1e-9)
        assert a["mediation_indirect_low"] == pytest.approx(b["mediation_indirect_low"], rel=1e-9)


def test_shipped_necessity_population_reruns_its_report():
    """probes/diagnose_modadd_necessity.toml on its saved table reproduces the shipped verdicts:
    key-frequency necessity on the training pairs adds beyond the knobs at the end."""
    import json
    from pathlib import Path

    from probekit.diagnosis.spec import load_diagnosis
    from probekit.diagnosis.table_diagnosis import table_diagnosis_from_file

    root = Path(__file__).resolve().parents[2]
    folder = root / "docs/diagnosis/modadd_necessity"
    spec = table_diagnosis_from_file(load_diagnosis(root / "probes/diagnose_modadd_necessity.toml"),
                                     folder / "markers.csv")
    res = diagnose_table(spec)
    shipped = json.loads((folder / "report.json").read_text())["diagnosis"]
    ref = {r["marker"]: r for r in shipped["analysis"]["markers"]}
    assert {s.marker for s in res.analysis.markers} == set(ref)
    for s in res.analysis.markers:
        assert s.verdict == ref[s.marker]["verdict"]
        assert s.partial_r == pytest.approx(ref[s.marker]["partial_r"], abs=1e-9)
    train = res.analysis["key_freq_necessity_train"]
    assert train.verdict == "adds_beyond_covariates" and 0.6 < train.partial_r < 0.75
    assert "measured_on_outcome_examples" in res.analysis["key_freq_necessity"].flags


def _crossing_population(path):
    """24 runs (3 seeds x 8 knob levels), one row each: the crossing step falls with the marker;
    runs whose step would pass 1000 never cross (empty cell)."""
    rng = np.random.default_rng(5)
    knob = np.repeat(np.arange(8.0), 3)
    seeds = np.tile(np.arange(3), 8)
    marker = rng.normal(size=24)
    step = 600 - 40 * knob - 150 * marker + 20 * rng.normal(size=24)
    table = {"run": [f"r{i}" for i in range(24)], "step": [300] * 24, "final": [0] * 24,
             "knob": knob.tolist(), "seed": seeds.tolist(), "marker": marker.tolist(),
             "id_step_0.9": [None if s > 700 else float(round(s / 25) * 25) for s in step]}
    path.write_text(_csv(table))
    return table


def test_censored_crossing_outcome_of_a_table(tmp_path):
    """censor = N fills the never-crossing runs with N for the analysis (the raw column stays in
    markers.csv) and adds the survival analysis over the censoring grid."""
    from probekit.diagnosis.statistics.survival import censor_crossing

    table = _crossing_population(tmp_path / "markers.csv")
    never = sum(v is None for v in table["id_step_0.9"])
    assert 2 <= never <= 12
    spec = _spec(tmp_path, 'knobs = ["knob"]\n',
                 'outcome = "id_step_0.9"\ncensor = 1100\nmarkers = ["marker"]\n'
                 'covariates = ["knob"]\n')
    res = diagnose_table(spec, out=tmp_path / "out")
    filled = censor_crossing({**table, "final": [1] * 24}, "id_step_0.9", 1100.0).table
    ref = marker_analysis({k: filled[k] for k in ("id_step_0.9", "knob", "seed", "marker")},
                          "id_step_0.9", markers=["marker"], covariates=["knob"], groups="seed",
                          n_permutations=300)
    assert res.analysis["marker"].partial_r == pytest.approx(ref["marker"].partial_r, abs=1e-9)
    assert res.analysis["marker"].partial_r < -0.5  # the planted effect, censored or not
    assert res.table["id_step_0.9"] == table["id_step_0.9"]  # markers.csv keeps the raw column
    surv = res.extras["survival"]
    assert surv["n_censored"] == never and surv["censors"][0] == 1100.0
    assert surv["cox"][0]["hazard_ratio"] > 1  # a higher marker crosses sooner
    assert any(f"{never} of 24" in getattr(b, "text", "") for b in res.blocks)


@pytest.mark.parametrize("diagnosis, match", [
    ('outcome = "id_step_0.9"\ncensor = "next_eval"\n', "no training history"),
    ('outcome = "marker"\ncensor = 1100\n', "only a crossing-step outcome"),
    ('outcome = "id_step_0.9"\ncensor = 400\nmarkers = ["marker"]\n', "not above the largest observed crossing"),
])
def test_censor_of_a_table_refused_with_the_fix(tmp_path, diagnosis, match):
    _crossing_population(tmp_path / "markers.csv")
    with pytest.raises((ConfigError, SuiteError), match=match):
        diagnose_table(_spec(tmp_path, "", diagnosis))
