import json

import numpy as np
import pytest

from probekit.suites import load_suite, run_suite

SUITE = """
[suite]
name = "tiny-neurons"
[model]
name = "smollm2-135m"
[data]
file = "facts.jsonl"
label = "relation"
train_split = "identify"
test_split = "test"
[[neurons]]
k = 12
kinds = ["mlp_pre"]
n_random = 5
shares = [0.5, 1.0]
generation = false
"""


@pytest.fixture(scope="module")
def smollm2():
    from probekit.models import load_model

    return load_model("smollm2-135m")


@pytest.mark.slow
def test_neurons_section_matches_api_and_renders(tmp_path, smollm2):
    with open("probes/data/relation_facts.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    keep = [r for r in rows if r["relation"] in ("capital", "antonym") and r["template"] == 0]
    picked = [r for rel in ("capital", "antonym") for split in ("identify", "test")
              for r in [x for x in keep if x["relation"] == rel and x["split"] == split][:6]]
    (tmp_path / "facts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in picked))
    (tmp_path / "s.toml").write_text(SUITE)
    suite = load_suite(tmp_path / "s.toml")
    result = run_suite(suite, model=smollm2, cache_dir=tmp_path / "cache", progress=False)
    (section,) = [a for a in result.analyses if a.section == "neurons"]
    exp = section.data["experiments"]
    assert exp["relations"] == ["capital", "antonym"] and exp["n_test"] == [6, 6]
    assert exp["set_sizes"] == {"capital": 12, "antonym": 12}
    assert len(section.hypotheses) == 2
    # direct API on the same prompts gives the same matrix
    from probekit.neurons import (
        DeactivationConfig,
        FactSet,
        neuron_statistics,
        relation_neuron_experiments,
    )
    from probekit.sites import Site

    def facts(split):
        rs = [r for r in picked if r["split"] == split]
        return FactSet.from_texts(smollm2, [r["text"] for r in rs], [r["relation"] for r in rs],
                                  [r["object"] for r in rs])

    ident = facts("identify")
    sites = [Site(layer, "mlp_pre") for layer in range(smollm2.cfg.n_layers)]
    stats = neuron_statistics(smollm2, ident.tokens, ident.relations, sites)
    direct = relation_neuron_experiments(
        smollm2, stats, facts("test"),
        DeactivationConfig(k=12, fraction=None, n_random=5, shares=(0.5, 1.0), generation=False),
        progress=False,
    )
    np.testing.assert_allclose(np.array(exp["change_first"], dtype=float),
                               direct.change_first.numpy(), atol=1e-9)
    assert exp["baseline_first"] == direct.baseline_first.tolist()
    blocks = [b["block"] for b in section.to_dict()["blocks"]]
    assert "heatmap" in blocks and "table" in blocks


@pytest.mark.slow
def test_zeroing_gate_or_up_units_equals_zeroing_the_same_post_units(smollm2):
    # SmolLM2's MLP: post = SiLU(gate) * up, and SiLU(0) = 0: the two deactivations coincide
    import torch

    from probekit.interventions import run_with_interventions
    from probekit.neurons import NeuronSet, deactivation_ops
    from probekit.sites import Site

    gate, up = Site(3, "mlp_pre"), Site(7, "mlp_pre_linear")
    s = NeuronSet(units={gate: torch.tensor([5, 77, 900]), up: torch.tensor([5, 1200])},
                  ranked=((gate, 5, 1.0), (gate, 77, 1.0), (gate, 900, 1.0), (up, 5, 1.0),
                          (up, 1200, 1.0)), label="t")
    toks = [smollm2.to_tokens(t, prepend_bos=False)[0].tolist()
            for t in ("The capital of France is", "The opposite of hot is")]
    ranked = run_with_interventions(smollm2, toks, deactivation_ops(s), logits="last").output
    post = run_with_interventions(smollm2, toks, deactivation_ops(s.at_mlp_post()),
                                  logits="last").output
    base = run_with_interventions(smollm2, toks, [], logits="last").output
    torch.testing.assert_close(ranked, post, rtol=0, atol=1e-5)
    assert float((ranked - base).abs().max()) > 1e-3  # the units do change the output


@pytest.mark.slow
def test_study_script_runs_the_suite_section(tmp_path):
    import importlib

    with open("probes/data/relation_facts.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    picked = [r for rel in ("capital", "antonym") for split in ("identify", "test")
              for r in [x for x in rows if x["relation"] == rel and x["split"] == split
                        and x["template"] == 0][:5]]
    (tmp_path / "facts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in picked))
    study = importlib.import_module("scripts.neurons_study")
    study.main(["--out", str(tmp_path / "out"), "--facts", str(tmp_path / "facts.jsonl"),
                "--fraction", "0.0002", "--n-spread", "5", "--no-generation"])
    out = json.loads((tmp_path / "out" / "neurons.json").read_text())
    assert out["summary"]["n_random"] == 39  # Holm over 2 relations at 0.05
    assert out["summary"]["n_test"] == {"capital": 5, "antonym": 5}
    assert out["experiments"]["n_spread"] == 5
    assert sorted(out["plots"]) == ["ap_by_layer.png", "cumulativity.png", "versatility.png"]
    for name in ("report.html", "report.json", *out["plots"]):
        assert (tmp_path / "out" / name).stat().st_size > 0
