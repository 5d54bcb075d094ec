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
                               direct.change_first.numpy(), atol=1e-12)
    assert exp["baseline_first"] == direct.baseline_first.tolist()
    blocks = [b["block"] for b in section.to_dict()["blocks"]]
    assert "heatmap" in blocks and "table" in blocks
