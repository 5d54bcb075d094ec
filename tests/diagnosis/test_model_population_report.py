"""The report of a population of model entries (issue 56 items 4 and 5).

On the tiny Hugging Face directories of ``test_real_models``: the header names the model entries
and the ``[data] file`` (not a training task), the report states how many models there are and
refuses population-level verdicts below the minimum, a marker's ``train`` split shows the split
it reads (``identify``), and a constant outcome gets the degenerate warning without a table of
granulated tau or a "drop a covariate" suggestion.
"""

from __future__ import annotations

import json

from probekit.diagnosis import diagnose
from probekit.diagnosis.runner import MIN_MODELS, models_statement
from tests.diagnosis.test_real_models import _file, cache, population  # noqa: F401 (fixtures)

DATA = '[data]\nfile = "examples_identify.jsonl"\nlabel = "label"\ntrain_split = "identify"\ntest_split = "test"'
MARKERS = ('[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\nsite = "resid_post@1"\n\n'
           '[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"')


def constant_outcome(model) -> dict[str, float]:
    """Every model scores 0.5 (a constant outcome)."""
    return {"const": 0.5}


def _identify_examples(root) -> None:
    text = (root / "examples.jsonl").read_text()
    (root / "examples_identify.jsonl").write_text(
        text.replace('"split": "train"', '"split": "identify"').replace('"split": "test_id"',
                                                                         '"split": "test"'))


def _texts(report: dict) -> list[str]:
    return [b.get("text", "") for a in report["analyses"] for b in a["blocks"]]


def test_model_population_report_header_splits_and_constant_outcome(population, cache, tmp_path):  # noqa: F811
    _identify_examples(population)
    path = _file(population, "header", models='["gpt-a", "gpt-b", "llama-a"]',
                 design='[population.design]\n"gpt-a" = { size = 1 }\n"gpt-b" = { size = 2 }\n'
                 '"llama-a" = { size = 1 }', data=DATA, outcome="", markers=MARKERS,
                 diagnosis='outcome = "const"\ngroups = ""')
    diagnose(path, out=tmp_path / "out", outcome=constant_outcome, executor="inprocess")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["model"]["id"] == ("population of 3 model entries (pretrained or saved models, "
                                     "not trained here)")
    source = report["data"]["source"]
    assert source["file"] == str(population / "examples_identify.jsonl") and "task" not in source
    assert len(source["sha256"]) == 64
    (rows,) = [b["rows"] for a in report["analyses"] for b in a["blocks"]
               if b.get("title") == "Marker definitions"]
    probe = next(r for r in rows if r["marker"] == "probe")
    assert "train_split=identify, test_split=test" in probe["keys"]
    texts = _texts(report)
    assert "This population has 3 model entries (each one unit of the analysis): population-level " \
        "verdicts need at least 3 (leave-one-out); with few models, one model moves every " \
        "estimate." in texts
    assert any("the outcome const is degenerate" in t for t in texts)
    assert not any("drop a covariate" in t for t in texts)
    assert "granulated" not in report["diagnosis"]  # the knob 'size' varies: no table of zeros
    assert report["diagnosis"]["settings"]["knobs"] == ["size"]


def test_the_statement_refuses_below_the_minimum():
    assert MIN_MODELS == 3
    two = models_statement(2)
    assert two.level == "warning" and "no population-level verdict" in two.text
    assert models_statement(1).text.startswith("This population has 1 model entry ")
    assert models_statement(3).level != "warning"
