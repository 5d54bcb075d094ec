"""Causal tracing: each restored cell equals a hand-built noised-and-restored run."""

from functools import partial

import torch

from probekit.capture import Site
from probekit.circuits import answer_logprob, causal_tracing
from probekit.interventions import Add, Read, Replace, run_with_interventions
from tests.conftest import random_sequences


def test_causal_tracing_cells_equal_manual_runs(tiny_model):
    _check_cells_equal_manual_runs(tiny_model)


def test_causal_tracing_on_a_hugging_face_model_with_kv_prefix(tiny_hf_model):
    _check_cells_equal_manual_runs(tiny_hf_model)


def _check_cells_equal_manual_runs(model):
    toks = random_sequences(3, model.cfg.d_vocab, lo=4, hi=7, seed=5)
    spans = [(0, 2), (1, 3), (0, 1)]
    answer = torch.tensor([1, 2, 3])
    metric = partial(answer_logprob, answer=answer)
    res = causal_tracing(model, toks, spans, metric, kind="resid_post", noise_scale=3.0, seed=7, batch_size=5)
    n_pos, d = max(map(len, toks)), model.cfg.d_model
    noise = torch.randn(3, n_pos, d, generator=torch.Generator().manual_seed(7)) * (3.0 * float(model.W_E.std()))
    mask = torch.zeros(3, n_pos, dtype=torch.bool)
    for i, (a, b) in enumerate(spans):
        mask[i, a:b] = True
    noised = Add(site=Site(None, "embed"), vector=noise, positions=mask)
    last = torch.tensor([len(t) - 1 for t in toks])

    def m(out):
        return metric(out[torch.arange(3), last], torch.arange(3))

    layer = model.cfg.n_layers - 1
    clean = run_with_interventions(model, toks, [Read(site=Site(layer, "resid_post"))])
    base = run_with_interventions(model, toks, [noised])
    torch.testing.assert_close(res.base, m(base.output), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(res.source, m(clean.output), atol=1e-5, rtol=1e-5)
    for t in range(2):
        cell = torch.zeros(3, n_pos, dtype=torch.bool)
        cell[:, t] = True
        restored = run_with_interventions(model, toks, [noised, Replace(site=Site(layer, "resid_post"),
                                                                          values=clean[Site(layer, "resid_post")],
                                                                          positions=cell)])
        torch.testing.assert_close(res.per_pair[:, layer, t], m(restored.output), atol=1e-5, rtol=1e-5)
    # restoring the final residual at the last token restores the clean output exactly
    full = torch.stack([res.per_pair[i, layer, int(last[i])] for i in range(3)])
    torch.testing.assert_close(full, res.source, atol=1e-5, rtol=1e-5)
