"""Kinds undefined for a model or task raise NotApplicableError (the diagnosis' "not applicable" cell).

Fourier / progress kinds on a SCAN checkpoint, bridge kinds on SCAN data, HE on KG data and on
SCAN data without modifiers or without multi-clause commands; kinds defined everywhere
(``weight_norm``, the new weight markers) still measure there.
"""

import numpy as np
import pytest

from probekit.errors import ConfigError, NotApplicableError
from probekit.homomorphism import PARSE_COLUMNS
from probekit.hypotheses.kinds.circuit_efficiency import CircuitEfficiencySpec, circuit_efficiency
from probekit.hypotheses.kinds.fourier_gini import FourierGiniSpec, fourier_gini
from probekit.hypotheses.kinds.restricted_loss import (
    LogitAblationSpec,
    excluded_loss,
    restricted_loss,
)
from probekit.hypotheses.kinds.restricted_loss_lead import RestrictedLeadSpec, restricted_loss_lead
from probekit.hypotheses.kinds.weight_norm import WeightNormSpec, weight_norm
from tests.hypotheses.helpers import FakeContext, FakeData, FakeSuite, examples


def _scan(**options):
    from probekit.models import build_model
    from probekit.testbeds import get_task

    cfg = dict(n_noise=0, max_samples=40, ood_lengths=(5,), n_ood_per_length=10, n_ood_combo=10,
               seed=0)
    task = get_task("scan", **{**cfg, **options})
    mcfg = task.model_config(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, seed=0)
    return task, mcfg, build_model(mcfg)


@pytest.fixture(scope="module")
def scan_run(tmp_path_factory):
    """A SCAN checkpoint inside a run (step 0 and step 10), as the trainer lays it out."""
    from probekit.models import load_checkpoint, save_checkpoint

    task, mcfg, model = _scan()
    run = tmp_path_factory.mktemp("scan") / "checkpoints"
    extra = {"task": "scan", "task_config": {"seed": 0}}
    for step in (0, 10):
        save_checkpoint(model, mcfg, run / f"step_{step:07d}", extra={**extra, "step": step})
    ds = task.splits()["train"]
    ex = examples(ds.tokens, {c: ds.metadata[c] for c in PARSE_COLUMNS},
                  {"train": np.arange(len(ds.tokens)), "test": np.arange(len(ds.tokens))})
    ex.vocab = task.vocab
    return FakeContext(model=load_checkpoint(run / "step_0000010"), examples=ex,
                       suite=FakeSuite(data=FakeData(prompt_only=False)))


@pytest.mark.parametrize("measure, spec", [
    (restricted_loss, LogitAblationSpec()),
    (excluded_loss, LogitAblationSpec(split="train")),
    (fourier_gini, FourierGiniSpec()),
    (circuit_efficiency, CircuitEfficiencySpec()),
    (restricted_loss_lead, RestrictedLeadSpec()),
])
def test_progress_kinds_on_scan_are_not_applicable(scan_run, measure, spec):
    with pytest.raises(NotApplicableError, match="task 'scan'.*modular addition only"):
        measure(spec, scan_run)


def test_fourier_key_share_on_scan_is_not_applicable(scan_run):
    from probekit.hypotheses.kinds.fourier_key_share import FourierKeyShareSpec, fourier_key_share

    with pytest.raises(NotApplicableError, match="trained on task 'scan'"):
        fourier_key_share(FourierKeyShareSpec(p=23, source="embedding"), scan_run)


def test_progress_kinds_need_a_checkpoint(scan_run):
    _, _, model = _scan()  # built, not loaded: no checkpoint, no recorded task
    with pytest.raises(NotApplicableError, match="not a probekit checkpoint"):
        fourier_gini(FourierGiniSpec(), FakeContext(model=model))


def test_kinds_defined_everywhere_still_measure_on_scan(scan_run):
    from probekit.hypotheses.kinds.layer_rotation import LayerRotationSpec, layer_rotation
    from probekit.hypotheses.kinds.weight_condition_number import (
        WeightConditionSpec,
        weight_condition_number,
    )

    w = weight_norm(WeightNormSpec(), scan_run)
    assert w.estimate == pytest.approx(sum(float((t.detach().double() ** 2).sum())
                                           for t in scan_run.model.parameters()))
    rot = layer_rotation(LayerRotationSpec(init="run"), scan_run)  # step 10 = step 0 weights here
    np.testing.assert_allclose(rot.values, 0.0, atol=1e-9)
    assert weight_condition_number(WeightConditionSpec(weight="W_U"), scan_run).estimate >= 1.0


@pytest.mark.parametrize("kind", ["rank", "probe"])
def test_bridge_kinds_on_scan_are_not_applicable(scan_run, kind):
    if kind == "rank":
        from probekit.hypotheses.kinds.bridge_entity_rank import BridgeEntityRankSpec as Spec
        from probekit.hypotheses.kinds.bridge_entity_rank import bridge_entity_rank as measure
    else:
        from probekit.hypotheses.kinds.bridge_entity_probe import BridgeEntityProbeSpec as Spec
        from probekit.hypotheses.kinds.bridge_entity_probe import bridge_entity_probe as measure
    with pytest.raises(NotApplicableError, match="two-hop knowledge-graph queries.*'bridge'"):
        measure(Spec(layer=0), scan_run)


def test_homomorphism_error_on_kg_data_is_not_applicable():
    from probekit.hypotheses.kinds.homomorphism_error import (
        HomomorphismErrorSpec,
        homomorphism_error,
    )
    from tests.kg.test_bridge import kg_task

    ds = kg_task().splits()["train"]
    ex = examples([ds.prompt(i) for i in range(len(ds))], dict(ds.metadata),
                  {"train": np.arange(len(ds))})
    ctx = FakeContext(examples=ex, suite=FakeSuite(data=FakeData(prompt_only=False)))
    with pytest.raises(NotApplicableError, match="SCAN-style task.*compositional"):
        homomorphism_error(HomomorphismErrorSpec(layer=0), ctx)


def _scan_ctx(**options):
    task, _, model = _scan(**options)
    ds = task.splits()["train"]
    ex = examples(ds.tokens, {c: ds.metadata[c] for c in PARSE_COLUMNS},
                  {"train": np.arange(len(ds.tokens))})
    ex.vocab = task.vocab
    return FakeContext(model=model, examples=ex, suite=FakeSuite(data=FakeData(prompt_only=False)))


def test_homomorphism_error_without_modifiers_or_clauses_is_not_applicable():
    from probekit.hypotheses.kinds.homomorphism_error import (
        HomomorphismErrorSpec,
        homomorphism_error,
    )

    plain = _scan_ctx(modifiers=(), held_out_combos=())
    with pytest.raises(NotApplicableError, match="no modifiers"):
        homomorphism_error(HomomorphismErrorSpec(layer=0), plain)
    single = _scan_ctx(train_clauses=(1,))
    with pytest.raises(NotApplicableError, match="single clauses"):
        homomorphism_error(HomomorphismErrorSpec(layer=0, composition="sequence"), single)
    # prompt_only data is a configuration mistake, not an undefined measure
    cfg_err = _scan_ctx()
    cfg_err.suite.data.prompt_only = True
    with pytest.raises(ConfigError, match="prompt_only") as info:
        homomorphism_error(HomomorphismErrorSpec(layer=0), cfg_err)
    assert not isinstance(info.value, NotApplicableError)


def test_circuit_efficiency_of_an_unfit_checkpoint_is_not_applicable():
    """At initialisation the mean train margin is < 0: norm per margin is undefined there."""
    from pathlib import Path

    from probekit.models import load_checkpoint

    init = Path(__file__).resolve().parents[2] / "probes/checkpoints/modadd-p53-series/step_0000000"
    with pytest.raises(NotApplicableError, match="logit margin is -?[0-9.e-]+ <= 0"):
        circuit_efficiency(CircuitEfficiencySpec(), FakeContext(model=load_checkpoint(init)))


def test_progress_kinds_on_the_kg_checkpoint_are_not_applicable():
    from pathlib import Path

    from probekit.models import load_checkpoint

    kg = load_checkpoint(Path(__file__).resolve().parents[2] / "probes/checkpoints/kg-composition")
    with pytest.raises(NotApplicableError, match="task 'kg_composition'"):
        fourier_gini(FourierGiniSpec(source="neuron_logit"), FakeContext(model=kg))
