"""The preset ``bio_scratch`` reproduces the direction of Allen-Zhu & Li (2023)'s augmentation effect.

Pilot p3 of docs/knowledge_scratch.md (seed 2, 1000 steps, ~50 CPU-s per arm): both arms answer
the trained QA (test_id 0.977 / 0.950), OOD QA 0.190 with one biography vs 0.478 with five.
"""

from __future__ import annotations

import pytest

from probekit.train.build import build_run
from probekit.train.trainer import train


def _final(tmp_path, augmentation: int) -> dict[str, float]:
    task, mcfg, tcfg = build_run("bio_scratch", steps=1000, seed=2,
                                 sets=[f"task.augmentation={augmentation}", "train.n_evals=1"])
    return train(task, mcfg, tcfg, tmp_path / str(augmentation), progress=False,
                 plot=False).records[-1]


@pytest.mark.slow
def test_augmentation_raises_ood_extraction(tmp_path):
    single, multi5 = _final(tmp_path, 1), _final(tmp_path, 5)
    assert single["test_id/acc"] >= 0.9 and multi5["test_id/acc"] >= 0.9  # both store
    assert single["test_ood/acc"] < 0.3 < 0.4 < multi5["test_ood/acc"]  # chance is 1/8
