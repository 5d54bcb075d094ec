import pytest

from probekit.train.build import build_run
from probekit.train.trainer import train


@pytest.mark.slow
def test_modular_addition_groks(tmp_path):
    task, mcfg, tcfg = build_run(
        "modular_addition", sets=["train.stop_metric=test_id/acc", "train.stop_threshold=0.95"]
    )
    h = train(task, mcfg, tcfg, tmp_path, progress=False)
    mem = h.first_step("train/acc", 1.0)
    grok = h.first_step("test_id/acc", 0.95)
    assert mem is not None and grok is not None
    assert grok["test_id/acc"] > 0.95
    assert mem["step"] < grok["step"]  # memorise first, generalise later
