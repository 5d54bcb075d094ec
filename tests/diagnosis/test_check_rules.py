"""The data-dependent rules of a diagnosis, shared by ``--check`` and the run (issue 59, item 2).

Each rule is one function; these tests call it on constructed cases (exact messages, the value
named) and, where it reads data, on the data (a run's history, an evaluation file, a table).
The command-line cases (exit 2, nothing written) are in tests/bad_input/test_round4_checks.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probekit.diagnosis.columns import check_generated, check_table_columns
from probekit.diagnosis.outcomes import EvalOutcomeSpec, eval_outcome_names
from probekit.diagnosis.population import Checkpoint
from probekit.diagnosis.runner import check_crossing_censor
from probekit.diagnosis.spec import (
    CausalPair,
    DiagnosisFile,
    DiagnosisSettings,
    check_causal_pairs,
    load_diagnosis,
)
from probekit.diagnosis.statistics.survival import censor_crossing, check_censor
from probekit.errors import ConfigError, DataError, KeyedValueError
from probekit.suites.spec import SuiteError
from probekit.train.history import History

# ---------------------------------------------------------------- censoring


@pytest.mark.parametrize("censor", [0, -5, 0.0, float("inf"), float("nan"), True])
def test_check_censor_refuses_a_step_that_is_not_positive_and_finite(censor):
    with pytest.raises(DataError, match=r"a censoring step must be a finite number > 0"):
        check_censor(censor)


def test_check_censor_against_the_observed_crossings():
    assert check_censor(1000, [200.0, None, 800.0]) == 1000.0
    with pytest.raises(DataError, match="censor = 500 is not above the largest observed crossing "
                                        "step 800"):
        check_censor(500, [200.0, None, 800.0])
    with pytest.raises(DataError, match="censor = 800 is not above"):
        check_censor(800, [800.0])  # a tie would rank a never-crossing run with one that crossed


@pytest.mark.parametrize("censor", [0.0, -5.0])
def test_the_file_refuses_a_censor_that_is_not_a_step(censor):
    with pytest.raises(KeyedValueError) as err:
        DiagnosisSettings(outcome="id_step_0.9", crossing=0.9, censor=censor)
    assert err.value.key == "censor" and f"censor = {censor:g}: a censoring step" in str(err.value)
    assert DiagnosisSettings(outcome="id_step_0.9", crossing=0.9, censor=100.0).censor == 100


def test_censor_crossing_applies_the_same_rule():
    table = {"id_step_0.9": [200, None], "run": ["a", "b"], "step": [300, 300], "final": [1, 1]}
    with pytest.raises(DataError, match="censor = 100 is not above the largest observed crossing"):
        censor_crossing(table, "id_step_0.9", 100.0)
    out = censor_crossing(table, "id_step_0.9", 400.0)
    assert out.table["id_step_0.9"] == [200, 400.0] and out.n_censored == 1


SMOKE = Path(__file__).resolve().parents[2] / "probes" / "diagnose_modadd_smoke.toml"


def _spec(tmp_path: Path, censor: str) -> DiagnosisFile:
    """The smoke diagnosis asking the crossing step at 0.9, censored at ``censor`` (TOML)."""
    text = SMOKE.read_text().replace('outcome = "id_accuracy"', 'outcome = "id_step_0.9"\n'
                                     f"crossing = 0.9{censor}")
    (tmp_path / "d.toml").write_text(text)
    return load_diagnosis(tmp_path / "d.toml")


def _run(root: Path, name: str, accs: list[float]) -> Checkpoint:
    run = root / name
    history = History()
    for i, acc in enumerate(accs):
        history.append({"step": 100 * (i + 1), "test_id/acc": acc})
    run.mkdir()
    history.write(run)
    return Checkpoint(path=str(run), run=str(run), step=300, final=True)


def test_crossing_censor_reads_existing_runs(tmp_path):
    """--check on existing runs: the crossings come from their histories (steps 200 and never)."""
    rows = [_run(tmp_path, "a", [0.5, 0.95, 0.97]), _run(tmp_path, "b", [0.1, 0.2, 0.3])]
    assert check_crossing_censor(_spec(tmp_path, "\ncensor = 400"), rows) == 400.0
    nxt = _spec(tmp_path, '\ncensor = "next_eval"')
    assert check_crossing_censor(nxt, rows) == 400.0  # 300 + (300 - 200)
    with pytest.raises(ConfigError) as err:
        check_crossing_censor(_spec(tmp_path, "\ncensor = 150"), rows)
    assert ("[diagnosis] censor: censor = 150 is not above the largest observed crossing step "
            "200") in str(err.value)
    with pytest.raises(ConfigError, match=r"1 of 2 runs never reach held-out accuracy 0.9 \(e.g. "):
        check_crossing_censor(_spec(tmp_path, ""), rows)


def test_crossing_censor_on_the_run_table_is_the_same_rule(tmp_path):
    with pytest.raises(ConfigError, match="censor = 150 is not above"):
        check_crossing_censor(_spec(tmp_path, "\ncensor = 150"), [], {"a": 200, "b": None})
    assert check_crossing_censor(_spec(tmp_path, ""), [], {"a": 200, "b": 300}) == float("inf")


# ---------------------------------------------------------------- n_bootstrap, treatments


@pytest.mark.parametrize("n", [1, 200, 999])
def test_the_file_refuses_fewer_bootstrap_draws_than_the_analysis_needs(n):
    with pytest.raises(KeyedValueError) as err:
        DiagnosisSettings(outcome="y", n_bootstrap=n,
                          mediation=(CausalPair(knob="lr", marker="m"),))
    assert err.value.key == "n_bootstrap" and err.value.rule.startswith(">= 1000")


def test_a_measured_treatment_is_refused_a_design_knob_accepted():
    pairs = (CausalPair(knob="id_accuracy", marker="he"),)
    with pytest.raises(ConfigError) as err:
        check_causal_pairs(pairs, "mediation", ["noise", "seed"], ["he"], "t.toml:5: [diagnosis] "
                           "mediation", measured={"id_accuracy", "ood_accuracy"})
    assert str(err.value) == (
        "t.toml:5: [diagnosis] mediation: knob 'id_accuracy' is a measured column, not a design "
        "knob: a causal estimate needs a knob the design sets (a manipulated treatment); the "
        "design knobs are ['noise', 'seed']; study 'id_accuracy' as a covariate or a marker instead")
    with pytest.raises(ConfigError, match="knob 'he2' is a measured column"):  # a marker
        check_causal_pairs((CausalPair(knob="he2", marker="he"),), "mediation", None, ["he", "he2"],
                           "w")
    check_causal_pairs((CausalPair(knob="noise", marker="he"),), "mediation", ["noise"], ["he"],
                       "w", measured={"id_accuracy"})


# ---------------------------------------------------------------- generated column names


def test_check_generated_refuses_a_name_twice_and_the_count_suffix():
    ok = [("a", "split 'a'", False), ("a__n", "the count of 'a'", True)]
    assert check_generated(ok, "w") == ["a", "a__n"]
    with pytest.raises(ConfigError, match=r"w: split 'b__n' gives the column 'b__n', which ends in "
                                          r"'__n', the suffix reserved for example counts"):
        check_generated([("b__n", "split 'b__n'", False)], "w")
    with pytest.raises(ConfigError, match="the column 'a' is generated twice: by split 'a' and by "
                                          "split 'A'"):
        check_generated([("a", "split 'a'", False), ("a", "split 'A'", False)], "w")


def test_eval_file_split_named_like_a_count_column_is_refused(tmp_path):
    rows = [{"prompt": f"q{i}", "answer": "a", "split": s}
            for i, s in enumerate(["capitals", "capitals", "capitals__n", "other"])]
    (tmp_path / "eval.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    spec = EvalOutcomeSpec(file="eval.jsonl", score="first_token", base=str(tmp_path))
    with pytest.raises(ConfigError) as err:
        eval_outcome_names(spec)
    assert ("score 'first_token' on split 'capitals__n' gives the column "
            "'first_token_capitals__n', which ends in '__n'") in str(err.value)
    rows[2]["split"] = "capitals_n"  # the count suffix is "__n": one underscore is a name
    (tmp_path / "eval.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert eval_outcome_names(spec) == {"first_token_capitals", "first_token_capitals__n",
                                        "first_token_capitals_n", "first_token_capitals_n__n",
                                        "first_token_other", "first_token_other__n"}


def test_check_table_columns_names_the_group_to_rename():
    groups = {"table": ["checkpoint", "run"], "outcome": ["id_accuracy", "id_accuracy__n"],
              "design": ["lr", "seed"], "marker": ["he"]}
    check_table_columns(groups, {})
    with pytest.raises(ConfigError) as err:
        check_table_columns({**groups, "design": ["id_accuracy"]}, {"design": "d.toml:3: design"})
    assert str(err.value) == ("d.toml:3: design: the design column 'id_accuracy' is also an "
                              "outcome column of the marker table; rename the design column")
    with pytest.raises(ConfigError, match="the marker column 'lr' is also a design column"):
        check_table_columns({**groups, "marker": ["lr"]}, {})
    with pytest.raises(ConfigError, match="the design column 'lr__n' ends in '__n'"):
        check_table_columns({**groups, "design": ["lr__n"]}, {})


# ------------------------------------------------- one n_permutations, one key locator


def test_stats_n_permutations_is_refused_naming_the_analysis_key(tmp_path):
    """``[stats] n_permutations`` sizes claim controls, which a diagnosis never measures."""
    text = SMOKE.read_text().replace("[stats]\n", "[stats]\nn_permutations = 500\n", 1)
    (tmp_path / "d.toml").write_text(text)
    with pytest.raises(SuiteError, match=r"d\.toml:\d+: \[stats\] n_permutations: .*never "
                                         r"measures.*\[diagnosis\] n_permutations: set that key"):
        load_diagnosis(tmp_path / "d.toml")


def test_a_key_is_located_by_at_and_where_is_refused_naming_it(tmp_path):
    spec = _spec(tmp_path, "")
    assert spec.at("diagnosis", "crossing").endswith("[diagnosis] crossing")
    with pytest.raises(AttributeError, match=r"DiagnosisFile\.at\(section, key\)"):
        spec.where("diagnosis", "crossing")
