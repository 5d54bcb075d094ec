"""circuit_faithfulness kind: the planted circuit's faithfulness equals faithfulness_curve's."""

from functools import partial

import numpy as np
import pytest

from probekit.circuits import edge_attribution, faithfulness_curve, logit_diff
from probekit.hypotheses.kinds.circuit_faithfulness import (
    CircuitFaithfulnessSpec,
    circuit_faithfulness,
)
from probekit.suites.spec import StatsSpec
from tests.circuits.planted import planted_model, planted_pairs
from tests.hypotheses.helpers import FakeContext, examples


def test_circuit_faithfulness_on_the_planted_circuit():
    model = planted_model()
    clean, corrupt, answer, foil = planted_pairs(n=8)
    tokens, cols = [], {"pair_id": [], "role": [], "answer": []}
    for i in range(8):
        for role, toks in (("clean", clean[i]), ("corrupt", corrupt[i])):
            tokens.append(toks)
            cols["pair_id"].append(i)
            cols["role"].append(role)
            cols["answer"].append(int(toks[0]))
    ex = examples(tokens, cols, {"train": np.arange(16), "test": np.arange(16)})
    ctx = FakeContext(model=model, examples=ex, stats=StatsSpec(n_bootstrap=1000))
    m = circuit_faithfulness(CircuitFaithfulnessSpec(k=3, method="eap", curve=(1, 2, 10)), ctx)
    metric = partial(logit_diff, answer=answer, foil=foil)
    want = faithfulness_curve(model, clean, corrupt, metric, edge_attribution(model, clean, corrupt, metric), [3])
    assert m.estimate == pytest.approx(float(want.normalized[0]), abs=1e-5)
    assert m.estimate > 0.99 and m.n == 8 and m.resamples.shape == (1000,)
    assert m.details["curve"]["ks"] == [3, 1, 2, 10]
    assert m.blocks and m.blocks[0].series[0].values[2] < 0.1  # 2 edges of the 3: nothing left
    two = circuit_faithfulness(CircuitFaithfulnessSpec(k=2, method="eap-ig", steps=3), ctx)
    assert abs(two.estimate) < 0.05 and not two.blocks
