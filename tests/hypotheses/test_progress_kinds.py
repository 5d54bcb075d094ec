"""Modular-addition progress kinds against probekit.grokking.progress_measures on the shipped series."""

from pathlib import Path

import numpy as np
import pytest

from probekit.errors import DataError
from probekit.grokking.modadd_checkpoints import train_mask
from probekit.grokking.progress_measures import (
    crossing_step,
    fourier_component_norms,
    gini,
    logit_margin,
    modular_logit_grid,
    modular_pair_loss,
    neuron_path,
    neuron_restricted_logits,
    progress_measures,
    restricted_logits,
)
from probekit.hypotheses.kinds.circuit_efficiency import CircuitEfficiencySpec, circuit_efficiency
from probekit.hypotheses.kinds.fourier_gini import FourierGiniSpec, fourier_gini
from probekit.hypotheses.kinds.restricted_loss import (
    LogitAblationSpec,
    excluded_loss,
    restricted_loss,
)
from probekit.hypotheses.kinds.restricted_loss_lead import RestrictedLeadSpec, restricted_loss_lead
from probekit.hypotheses.kinds.weight_norm import WeightNormSpec, weight_norm
from probekit.hypotheses.verdict import judge_all
from tests.hypotheses.helpers import FakeContext, claim

SERIES = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53-series"
FINAL = SERIES / "step_0001000"


@pytest.fixture(scope="module")
def final():
    from probekit.models import load_checkpoint

    model = load_checkpoint(FINAL)
    return FakeContext(model=model), modular_logit_grid(model, 53), train_mask(FINAL)


def test_restricted_and_excluded_loss_kinds(final):
    ctx, logits, mask = final
    keys = (2, 7, 12, 13, 20)
    m = restricted_loss(LogitAblationSpec(keys=keys), ctx)  # path = "neuron" (the paper's)
    ref = modular_pair_loss(neuron_restricted_logits(logits, neuron_path(ctx.model, 53), keys))
    assert m.n == 53 * 53 and m.estimate == pytest.approx(ref.mean(), rel=1e-9)
    assert m.details["path"] == "neuron" and "neuron path" in m.method
    full = restricted_loss(LogitAblationSpec(keys=keys, path="logits"), ctx)
    ref = modular_pair_loss(restricted_logits(logits, keys))
    assert full.estimate == pytest.approx(ref.mean(), rel=1e-9) and "full logits" in full.method
    e = excluded_loss(LogitAblationSpec(split="train"), ctx)  # keys found: the same five
    assert e.details["keys"] == [2, 20, 12, 7, 13] and e.n == mask.sum()
    assert e.estimate > 3.0 > m.estimate  # removing 5 frequencies destroys the training fit
    assert judge_all([(claim(">=", (2.0,)), e)])[0].verdict == "PASS"


def test_gini_weight_norm_and_efficiency_kinds(final):
    ctx, logits, mask = final
    g = fourier_gini(FourierGiniSpec(source="embed"), ctx)
    assert g.estimate == pytest.approx(gini(fourier_component_norms(
        ctx.model.W_E.detach().double().numpy()[:53])), rel=1e-9)
    assert g.resamples.shape == (1000,) and g.n == 128
    w = weight_norm(WeightNormSpec(), ctx)
    sq = sum(float((t.detach().double() ** 2).sum()) for t in ctx.model.parameters())
    assert w.estimate == pytest.approx(sq, rel=1e-9)
    e = circuit_efficiency(CircuitEfficiencySpec(), ctx)
    assert e.estimate == pytest.approx(np.sqrt(sq) / logit_margin(logits)[mask].mean(), rel=1e-9)


def test_restricted_loss_lead_matches_the_series_crossings():
    ctx = FakeContext()
    spec = RestrictedLeadSpec(checkpoints=str(SERIES / "step_*"), loss_threshold=1.0,
                                 keys=(2, 7, 12, 13, 20))
    m = restricted_loss_lead(spec, ctx)
    dirs = sorted((int(d.name[5:]), d) for d in SERIES.glob("step_*"))
    series = progress_measures(dirs, train_mask=train_mask(FINAL), keys=spec.keys)
    want = (crossing_step(series.steps, series.curve("test_loss"), 1.0)
            - crossing_step(series.steps, series.curve("restricted_loss"), 1.0))
    assert m.estimate == pytest.approx(want) and m.details["steps"] == [0, 50, 100, 200, 1000]
    assert m.details["path"] == series.path == "neuron"
    assert 50 < m.details["restricted_step"] < 100 < m.details["test_step"] < 200
    assert judge_all([(claim(">=", (0.0,)), m)])[0].verdict == "PASS"
    with pytest.raises(DataError, match="never falls"):
        restricted_loss_lead(RestrictedLeadSpec(checkpoints=str(SERIES / "step_*"),
                                                      loss_threshold=1e-9), ctx)
