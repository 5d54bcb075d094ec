"""EAP / EAP-IG: a planted circuit recovered, brute-force edge scores, identities, edge patching."""

from functools import partial

import pytest
import torch

from probekit.capture import Site
from probekit.circuits import (
    attribution_patching,
    edge_attribution,
    edge_graph,
    edge_patched_metric,
    faithfulness_curve,
    logit_diff,
    top_k_edges,
)
from probekit.errors import ConfigError, DataError
from probekit.interventions import Add, Grad, Read, run_with_interventions
from probekit.models import build_model
from tests.circuits.planted import TRUE_EDGES, planted_model, planted_pairs
from tests.conftest import TINY_CONFIGS


@pytest.fixture(scope="module")
def gqa64():
    return build_model(TINY_CONFIGS["gqa_rotary_rms"]).to(torch.float64)


def _data(vocab=13, n=3, length=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, vocab, (n, length), generator=g).tolist()
    corrupt = torch.randint(0, vocab, (n, length), generator=g).tolist()
    metric = partial(logit_diff, answer=torch.tensor([1, 2, 3][:n]), foil=torch.tensor([4, 5, 6][:n]))
    return clean, corrupt, metric


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_planted_circuit_is_recovered(method):
    model = planted_model()
    clean, corrupt, answer, foil = planted_pairs()
    metric = partial(logit_diff, answer=answer, foil=foil)
    scores = edge_attribution(model, clean, corrupt, metric, method=method)
    found = {(s, d) for s, d, _ in scores.top(len(TRUE_EDGES))}
    precision = len(found & TRUE_EDGES) / len(found)
    recall = len(found & TRUE_EDGES) / len(TRUE_EDGES)
    assert precision == 1.0 and recall == 1.0
    # every other edge scores ~0 (distractor heads/MLPs change but write where nothing reads)
    rest = [abs(v) for s, d, v in scores.top(scores.graph.n_edges) if (s, d) not in TRUE_EDGES]
    assert max(rest) < 1e-3 * min(abs(v) for _, _, v in scores.top(3))
    curve = faithfulness_curve(model, clean, corrupt, metric, scores, [2, 3, 10], ablation="patch")
    assert curve.normalized[1] >= 0.9  # the 3-edge circuit keeps the metric
    assert abs(float(curve.normalized[0])) < 0.1  # any 2 of them do not
    # mean ablation also removes the positional keys/queries the two heads attend by: the circuit
    # then needs those edges too
    g = scores.graph
    circ = torch.zeros_like(g.mask)
    for src, dst in TRUE_EDGES | {("input", "a0.h0<k>"), ("input", "a1.h1<q>"), ("input", "a1.h1<k>")}:
        circ[g.edge_index(src, dst)] = True
    both = edge_patched_metric(model, clean, corrupt, metric, torch.stack([circ, top_k_edges(scores, 3)]),
                               ablation="mean")
    norm = (both.mean(0) - scores.corrupt.mean()) / (scores.clean.mean() - scores.corrupt.mean())
    assert norm[0] >= 0.9 and norm[1] < 0.9
    d = curve.to_dict()
    assert d["ks"] == [2, 3, 10] and len(d["top_edges"]) == 10


@pytest.mark.parametrize("name,eps,tol", [("ln_mha", 1e-4, 1e-5), ("gqa_rotary_rms", 1e-3, 1e-4)])
def test_edge_scores_equal_finite_differences(name, eps, tol):
    """score(u -> v) = (a_u(corrupt) - a_u(clean)) . dm/d in_v: brute force by central differences.

    ``ln_mha`` runs in float64 throughout (1e-5); the bridge's RMSNorm computes in float32, which
    limits the finite differences on ``gqa_rotary_rms``.
    """
    model = build_model(TINY_CONFIGS[name]).to(torch.float64)
    cfg = model.cfg
    clean, corrupt, metric = _data(vocab=cfg.d_vocab)
    scores = edge_attribution(model, clean, corrupt, metric)
    graph = scores.graph
    top = cfg.n_layers - 1
    kv = "h" if graph.n_kv_heads == graph.n_heads else "kv"
    h = cfg.n_heads - 1
    reads = [Site(0, "attn_z"), Site(0, "mlp_out"), Site(0, "resid_pre")]
    cln = run_with_interventions(model, clean, [Read(site=s) for s in reads])
    cor = run_with_interventions(model, corrupt, [Read(site=s) for s in reads])
    delta = {
        f"a0.h{h}": (cor[reads[0]][:, :, h] - cln[reads[0]][:, :, h]) @ model.blocks[0].attn.W_O[h],
        "m0": cor[reads[1]] - cln[reads[1]],
        "input": cor[reads[2]] - cln[reads[2]],
    }
    edges = [(f"a0.h{h}", Site(top, "q_input", 1), f"a{top}.h1<q>"),
             (f"a0.h{h}", Site(top, "k_input", 0), f"a{top}.{kv}0<k>"),
             ("input", Site(0, "v_input", 1), f"a0.{kv}1<v>"),
             ("m0", Site(top, "mlp_in"), f"m{top}"),
             ("m0", Site(top, "resid_post"), "logits"),
             (f"a0.h{h}", Site(0, "mlp_in"), "m0")]
    last = torch.tensor([len(t) - 1 for t in clean])
    for src, site, dst in edges:
        def m(e, site=site, src=src):
            out = run_with_interventions(model, clean, [Add(site=site, vector=delta[src], scale=e)]).output
            return metric(out[torch.arange(len(clean)), last], torch.arange(len(clean))).mean()

        fd = float((m(eps) - m(-eps)) / (2 * eps))
        u, v = graph.edge_index(src, dst)
        assert abs(float(scores.scores[u, v]) - fd) < tol * max(1.0, abs(fd)), (src, dst, float(scores.scores[u, v]), fd)
        assert abs(fd) > 1e-4


def test_ig_one_step_is_eap_and_more_steps_differ(gqa64):
    clean, corrupt, metric = _data()
    eap = edge_attribution(gqa64, clean, corrupt, metric)
    ig1 = edge_attribution(gqa64, clean, corrupt, metric, method="eap-ig", steps=1)
    ig5 = edge_attribution(gqa64, clean, corrupt, metric, method="eap-ig", batch_size=4)
    torch.testing.assert_close(ig1.scores, eap.scores, atol=1e-6, rtol=1e-6)
    assert ig5.steps == 5 and (ig5.scores - eap.scores).abs().max() > 1e-3
    # the reference code's left rule (alpha = 0..4/5) = ours + (s(0) - s(1)) / 5, where s(1) is EAP and
    # s(0) -- the gradient at the corrupted input -- is minus EAP with clean and corrupt swapped
    left = edge_attribution(gqa64, clean, corrupt, metric, method="eap-ig", ig_points="left")
    swapped = edge_attribution(gqa64, corrupt, clean, metric)
    torch.testing.assert_close(left.scores, ig5.scores + (-swapped.scores - eap.scores) / 5, atol=1e-6, rtol=1e-5)


def test_node_sums_equal_attribution_patching(gqa64):
    """Sum of a node's outgoing edge scores = its attribution-patching score (noising)."""
    model = gqa64
    clean, corrupt, metric = _data()
    scores = edge_attribution(model, clean, corrupt, metric)
    g = scores.graph
    ap = attribution_patching(model, clean, corrupt, metric, kind="mlp_out", direction="noise")
    node = (ap.per_pair - ap.base[:, None, None]).nansum(2).mean(0)  # (layer,)
    for layer in range(g.n_layers):
        u = g.upstream.index(f"m{layer}")
        torch.testing.assert_close(scores.scores[u].sum().double(), node[layer].double(), atol=1e-5, rtol=1e-5)
    aph = attribution_patching(model, clean, corrupt, metric, kind="attn_z", by=("layer", "pos", "head"),
                               direction="noise")
    heads = (aph.per_pair - aph.base[:, None, None, None]).nansum(2).mean(0)  # (layer, head)
    u = g.upstream.index("a1.h3")
    torch.testing.assert_close(scores.scores[u].sum().double(), heads[1, 3].double(), atol=1e-5, rtol=1e-5)
    # incoming: sum over upstream of edges into m1 = (resid_mid(corrupt) - resid_mid(clean)) . dm/d mlp_in
    site, grad = Site(1, "resid_mid"), Site(1, "mlp_in")
    every = torch.arange(len(clean))
    cor = run_with_interventions(model, corrupt, [Read(site=site)])[site]
    run = run_with_interventions(model, clean, [Read(site=site), Grad(site=grad)], logits="last",
                                 objective=lambda logits, b: metric(logits, every))
    want = ((cor - run[site]) * run.grads[grad]).sum() / len(clean)
    torch.testing.assert_close(scores.scores[:, g.downstream.index("m1")].sum().double(), want.double(),
                               atol=1e-5, rtol=1e-5)


def test_edge_patching_exact(gqa64):
    model = gqa64
    clean, corrupt, metric = _data()
    g = edge_graph(model)
    full, none = g.mask, torch.zeros_like(g.mask)
    one = g.mask.clone()
    u, v = g.edge_index("a0.h4", "a1.h2<q>")
    one[u, v] = False
    out = edge_patched_metric(model, clean, corrupt, metric, torch.stack([full, none, one]))
    every = torch.arange(len(clean))
    last = torch.tensor([len(t) - 1 for t in clean])
    m_clean = metric(run_with_interventions(model, clean).output[every, last], every)
    m_corrupt = metric(run_with_interventions(model, corrupt).output[every, last], every)
    torch.testing.assert_close(out[:, 0].double(), m_clean.double(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out[:, 1].double(), m_corrupt.double(), atol=1e-6, rtol=1e-6)
    # one edge patched = that head's query input gets the upstream head's corrupted output instead
    z = Site(0, "attn_z")
    dz = (run_with_interventions(model, corrupt, [Read(site=z)])[z][:, :, 4]
          - run_with_interventions(model, clean, [Read(site=z)])[z][:, :, 4])
    add = run_with_interventions(model, clean, [Add(site=Site(1, "q_input", 2), vector=dz @ model.blocks[0].attn.W_O[4])])
    torch.testing.assert_close(out[:, 2].double(), metric(add.output[every, last], every).double(), atol=1e-6, rtol=1e-6)


def test_padding_and_uneven_pairs(gqa64):
    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])
    g = torch.Generator().manual_seed(2)
    lengths = [4, 6, 5]
    clean = [torch.randint(0, 13, (n,), generator=g).tolist() for n in lengths]
    corrupt = [torch.randint(0, 13, (n,), generator=g).tolist() for n in lengths]
    metric = partial(logit_diff, answer=torch.tensor([1, 2, 3]), foil=torch.tensor([4, 5, 6]))
    left = edge_attribution(model, clean, corrupt, metric, padding_side="left")
    right = edge_attribution(model, clean, corrupt, metric, padding_side="right")
    torch.testing.assert_close(left.scores, right.scores, atol=1e-5, rtol=1e-4)
    singles = [edge_attribution(model, [c], [r], partial(logit_diff, answer=torch.tensor([a]), foil=torch.tensor([f])))
               for c, r, a, f in zip(clean, corrupt, [1, 2, 3], [4, 5, 6])]
    torch.testing.assert_close(right.scores, sum(s.scores for s in singles) / 3, atol=1e-5, rtol=1e-4)
    circ = top_k_edges(right, 20)
    two = torch.stack([circ, top_k_edges(right, 50)])
    a = edge_patched_metric(model, clean, corrupt, metric, two, padding_side="left", batch_size=3)
    b = edge_patched_metric(model, clean, corrupt, metric, two, padding_side="right")
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_chunking_does_not_change_results():
    """Memory is bounded by batch_size: chunks of pairs (and of IG steps) give the same numbers."""
    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])
    clean, corrupt, metric = _data(n=3, length=5, seed=4)
    chunked = edge_attribution(model, clean, corrupt, metric, method="eap-ig", steps=2, batch_size=1)
    whole = edge_attribution(model, clean, corrupt, metric, method="eap-ig", steps=2, batch_size=64)
    torch.testing.assert_close(chunked.scores, whole.scores, atol=1e-5, rtol=1e-4)
    two = torch.stack([top_k_edges(whole, 20), top_k_edges(whole, 50)])
    for ablation in ("mean", "patch"):
        c = edge_patched_metric(model, clean, corrupt, metric, two, ablation=ablation, batch_size=1)
        d = edge_patched_metric(model, clean, corrupt, metric, two, ablation=ablation, batch_size=64)
        torch.testing.assert_close(c, d, atol=1e-5, rtol=1e-4)


def test_bad_input(gqa64):
    clean, corrupt, metric = _data()
    with pytest.raises(ConfigError, match="method"):
        edge_attribution(gqa64, clean, corrupt, metric, method="acdc")
    with pytest.raises(DataError, match="tokens"):
        edge_attribution(gqa64, clean, [t[:-1] for t in corrupt], metric)
    scores = edge_attribution(gqa64, clean, corrupt, metric)
    with pytest.raises(ConfigError, match="out of range"):
        top_k_edges(scores, scores.graph.n_edges + 1)
    with pytest.raises(DataError, match="upstream, downstream"):
        edge_patched_metric(gqa64, clean, corrupt, metric, torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ConfigError, match="not an edge"):
        scores.graph.edge_index("m2", "m1")
