"""[[neurons]] on a saved checkpoint of the planted model (fast; no tokenizer: token-id objects)."""

import json

import numpy as np

from probekit.models import ModelConfig, save_checkpoint
from probekit.suites import load_suite, run_suite

from .planted import D_MLP, RED, E, IdTokenizer, R, planted_model

SUITE = """
[suite]
name = "planted-neurons"
[model]
checkpoint = "ckpt"
[data]
file = "facts.jsonl"
label = "relation"
train_split = "identify"
test_split = "test"
[[neurons]]
k = 4
kinds = ["mlp_post"]
shares = [0.25, 0.5, 1.0]
generation = false
"""


def _write_checkpoint_and_facts(tmp_path):
    model, facts = planted_model()
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=1, d_head=32, d_mlp=D_MLP, act_fn="relu",
                      normalization_type=None, d_vocab=E + R, n_ctx=2)
    save_checkpoint(model, cfg, tmp_path / "ckpt")
    rows = [{"tokens": t, "relation": r, "object": str(o), "split": split,
             "subject": f"{split}-{t[0]}"}
            for split in ("identify", "test") for t, r, o in facts]
    (tmp_path / "facts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_neurons_section_on_planted_checkpoint(tmp_path):
    _write_checkpoint_and_facts(tmp_path)
    (tmp_path / "s.toml").write_text(SUITE)
    result = run_suite(load_suite(tmp_path / "s.toml"), cache_dir=tmp_path / "cache",
                       progress=False)
    (section,) = [a for a in result.analyses if a.section == "neurons"]
    exp = section.data["experiments"]
    assert exp["relations"] == ["rel0", "rel1", "rel2"]
    assert exp["set_sizes"] == {f"rel{r}": RED for r in range(R)}
    np.testing.assert_array_equal(exp["change_first"], -np.eye(3))
    np.testing.assert_array_equal(exp["cumulative"], [[0, 1, 1]] * 3)
    assert exp["n_random"] == 59  # default: the fewest sets for Holm over 3 relations at 0.05
    assert [h.decision().startswith("reject") for h in section.hypotheses] == [True] * 3
    assert not section.warnings
    (table,) = [b for b in section.to_dict()["blocks"] if b["block"] == "table"]
    own = np.array(exp["random_own"]) * 100  # the range over all 59 sets, on r's own facts
    assert [r["rand"] for r in table["rows"]] == [f"[{o.min():+.0f}, {o.max():+.0f}]" for o in own]
    assert any(c["header"] == "59 random sets: change on r [min, max]" for c in table["columns"])
    # every p sits beside its permutation floor 1 / (1 + n_random) (Holm: 3 / 60)
    assert [r["p_floor"] for r in table["rows"]] == [1 / 60] * 3 == [exp["p_floor"]] * 3
    assert [r["p_holm_floor"] for r in table["rows"]] == [3 / 60] * 3
    blocks = [b["block"] for b in section.to_dict()["blocks"]]
    assert blocks.count("heatmap") == 1 and blocks.count("lineplot") == 2


def test_too_few_random_sets_for_holm_warns(tmp_path):
    _write_checkpoint_and_facts(tmp_path)
    (tmp_path / "s.toml").write_text(SUITE + "n_random = 19\n")
    result = run_suite(load_suite(tmp_path / "s.toml"), cache_dir=tmp_path / "cache",
                       progress=False)
    (section,) = [a for a in result.analyses if a.section == "neurons"]
    assert any("smallest Holm-adjusted p over 3 relations is 0.15" in w and "n_random >= 59" in w
               for w in section.warnings)


def test_shared_subjects_between_splits_are_refused(tmp_path):
    import pytest

    from probekit.errors import DataError

    _write_checkpoint_and_facts(tmp_path)
    text = (tmp_path / "facts.jsonl").read_text().replace('"subject": "test-', '"subject": "identify-')
    (tmp_path / "facts.jsonl").write_text(text)
    (tmp_path / "s.toml").write_text(SUITE)
    with pytest.raises(DataError, match="share subjects"):
        run_suite(load_suite(tmp_path / "s.toml"), cache_dir=tmp_path / "cache", progress=False)



def test_generation_and_post_tests_are_hypotheses_too(tmp_path, monkeypatch):
    """With generation and post on, each metric's per-relation tests (Holm within the metric) are
    hypotheses of the report, beside the first-token ones."""
    import probekit.neurons as neurons
    from probekit.neurons import DeactivationConfig, relation_neuron_experiments
    from probekit.neurons.examples import RelationNeuronStudy

    from .planted import PLANTED_SITES, planted_study

    model, fs, stats = planted_study()
    model.tokenizer = IdTokenizer()
    cfg = DeactivationConfig(k=RED, fraction=None, n_random=59, shares=(1.0,), n_single=1,
                             generation=True, post=True, max_new_tokens=1)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    study = RelationNeuronStudy(sites=tuple(PLANTED_SITES), identification=fs, test=fs,
                                statistics=stats, experiments=res)
    monkeypatch.setattr(neurons, "relation_neuron_study", lambda ctx, **kw: study)
    _write_checkpoint_and_facts(tmp_path)
    (tmp_path / "s.toml").write_text(SUITE.replace("generation = false", "generation = true\npost = true"))
    result = run_suite(load_suite(tmp_path / "s.toml"), cache_dir=tmp_path / "cache", progress=False)
    (section,) = [a for a in result.analyses if a.section == "neurons"]
    hyps = section.hypotheses
    assert [h.name for h in hyps] == [
        f"deactivating the rel{r} neurons{how} hurts rel{r} facts more than matched random sets"
        for how in ("", " (scored by greedy generation)", " at mlp_post") for r in range(R)]
    assert [h.metric for h in hyps[3:6]] == ["greedy-generation accuracy drop"] * 3
    assert [h.p_value for h in hyps] == [*res.p_holm, *res.p_holm_generation, *res.p_holm_post]
    assert [h.statistic for h in hyps[3:6]] == [t.statistic for t in res.tests_generation]
    assert res.p_holm_generation == (3 / 60,) * 3  # the planted sets: every test at its Holm floor
    assert all(h.decision() == "reject H0 (relation-specific)" for h in hyps)
    heats = [b for b in section.to_dict()["blocks"] if b["block"] == "heatmap"]
    assert [h["title"].split(" accuracy")[0] for h in heats] == ["First-token", "Greedy-generation"]
    np.testing.assert_allclose(heats[1]["values"], 100 * res.change_generation.numpy())
