"""``bridge_entity_rank`` on the planted composition circuit: ID passes, OOD fails, exact rates."""

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.hypotheses.kinds.bridge_entity_rank import BridgeEntityRankSpec, bridge_entity_rank
from probekit.hypotheses.verdict import judge_all
from probekit.suites.data import Examples
from tests.hypotheses.helpers import FakeContext, claim
from tests.kg.test_bridge import kg_task, planted_model


@pytest.fixture(scope="module")
def planted_ctx():
    task = kg_task()
    s = task.splits()
    tokens, columns, splits = [], {}, {}
    for name, key in (("test_id", "test"), ("test_ood", "ood:test_ood"), ("train", "train")):
        ds = s[name]
        start = len(tokens)
        tokens += [ds.prompt(i) for i in range(len(ds))]
        for k, v in ds.metadata.items():
            columns.setdefault(k, []).extend(v)
        splits[key] = np.arange(start, len(tokens))
    ex = Examples(tokens=tokens, columns=columns, splits=splits, vocab=task.vocab)
    return FakeContext(model=planted_model(task), examples=ex)


def test_rates_and_verdicts(planted_ctx):
    ctx = planted_ctx
    m_id = bridge_entity_rank(BridgeEntityRankSpec(layer=0), ctx)
    m_ood = bridge_entity_rank(BridgeEntityRankSpec(layer=0, split="test_ood"), ctx)
    assert m_id.estimate == 1.0 and m_id.n == len(ctx.examples.split("test"))
    assert m_ood.estimate == 0.0 and m_ood.details["median_rank"] == 1.0
    assert m_id.details["bridge_top_k_by_layer"] == [1.0, 1.0]
    assert m_id.details["answer_top_k_by_layer"] == [0.0, 1.0]
    ans0 = bridge_entity_rank(BridgeEntityRankSpec(layer=0, target="answer"), ctx)
    ans1 = bridge_entity_rank(BridgeEntityRankSpec(layer=1, target="answer"), ctx)
    assert ans0.estimate == 0.0 and ans1.estimate == 1.0
    # train holds one-hop facts (no bridge): only its two-hop rows are measured
    train = bridge_entity_rank(BridgeEntityRankSpec(layer=0, split="train"), ctx)
    hops = np.array(ctx.examples.columns["hop"])[ctx.examples.split("train")]
    assert train.n == int((hops == 2).sum())
    results = judge_all([(claim(">=", (0.5,)), m_id), (claim(">=", (0.5,)), m_ood)])
    assert [r.verdict for r in results] == ["PASS", "FAIL"]
    assert m_id.blocks[0].series[0].values == (1.0, 1.0)


def test_bad_claims(planted_ctx):
    with pytest.raises(ConfigError, match="layer 2 must be in 0..1"):
        bridge_entity_rank(BridgeEntityRankSpec(layer=2), planted_ctx)
    with pytest.raises(ConfigError, match="entity_token '<x{}>' gives '<x"):
        bridge_entity_rank(BridgeEntityRankSpec(layer=0, entity_token="<x{}>"), planted_ctx)


def test_probe_kind_equals_the_api(planted_ctx):
    from probekit.hypotheses.kinds.bridge_entity_probe import (
        BridgeEntityProbeSpec,
        bridge_entity_probe,
    )
    from probekit.kg import bridge_entity_probe as api

    ctx = planted_ctx
    ex = ctx.examples
    m = bridge_entity_probe(BridgeEntityProbeSpec(layer=0, split="test_ood"), ctx)
    b = ex.columns["bridge"]
    tr = [i for i in ex.split("train") if b[i] is not None]
    ev = list(ex.split("test_ood"))
    tok = lambda e: ex.vocab.id(f"<e{e}>")  # noqa: E731
    ref = api(ctx.model, [ex.tokens[i] for i in tr], [tok(b[i]) for i in tr], {"x": [ex.tokens[i] for i in ev]},
              {"x": [tok(b[i]) for i in ev]}, layers=[0])
    np.testing.assert_array_equal(m.values, ref.correct["x"][:, 0].astype(float))
    assert m.n == len(ev) and m.details["n_train"] == ref.n_train
