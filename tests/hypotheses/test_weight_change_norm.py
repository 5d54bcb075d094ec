"""``weight_change_norm`` on a constructed fine-tune: planted weight changes of known norm."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from probekit.errors import DataError, NotApplicableError
from probekit.hypotheses.kinds.weight_change_norm import (
    WeightChangeNormSpec,
    weight_change,
    weight_change_norm,
)
from probekit.train.finetune import FORMAT
from tests.hypotheses.helpers import FakeContext, FakeSuite
from tests.train.finetune_helpers import tiny_llama

UP, DOWN = "model.layers.1.mlp.up_proj.weight", "model.layers.2.mlp.down_proj.weight"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path, dict[str, torch.Tensor]]:
    """A tiny Llama ``base`` and a copy ``ft`` with ``+0.5`` on one tensor and ``-2`` on another."""
    root = tmp_path_factory.mktemp("wcn")
    base = tiny_llama(root / "base")
    ft = root / "ft"
    shutil.copytree(base, ft)
    state = load_file(str(base / "model.safetensors"))
    changed = dict(state)
    changed[UP] = state[UP] + 0.5
    changed[DOWN] = state[DOWN] - 2.0
    save_file({k: v.contiguous() for k, v in changed.items()}, str(ft / "model.safetensors"),
              metadata={"format": "pt"})
    (ft / "finetune.json").write_text(json.dumps({"format": FORMAT, "base_model": str(base),
                                                  "base_dir": str(base)}))
    return base, ft, state


def _ctx(directory: Path | None) -> FakeContext:
    model = SimpleNamespace() if directory is None else SimpleNamespace(probekit_hf_dir=str(directory))
    return FakeContext(model=model, suite=FakeSuite())


def test_planted_change_has_its_frobenius_norm(dirs):
    base, ft, state = dirs
    n_up, n_down = state[UP].numel(), state[DOWN].numel()
    want = math.sqrt(0.25 * n_up + 4.0 * n_down)  # ||c 1||_F = |c| sqrt(n), up to float32 rounding
    delta, base_sq, n_changed = weight_change(ft, base)
    assert n_changed == 2 and math.sqrt(delta) == pytest.approx(want, rel=1e-6)
    stored = load_file(str(ft / "model.safetensors"))
    want = math.sqrt(sum(float(((stored[k].double() - state[k].double()) ** 2).sum())
                         for k in (UP, DOWN)))  # the stored float32 values: exact to rounding
    ref_sq = float((state[UP].double() ** 2).sum() + (state[DOWN].double() ** 2).sum())
    assert base_sq == pytest.approx(ref_sq, rel=1e-9)
    m = weight_change_norm(WeightChangeNormSpec(), _ctx(ft))  # base from finetune.json
    assert m.estimate == pytest.approx(want, rel=1e-9) and m.n == 1
    assert np.all(m.resamples == m.estimate)
    rel = weight_change_norm(WeightChangeNormSpec(base=str(base), relative=True), _ctx(ft))
    assert rel.estimate == pytest.approx(want / math.sqrt(ref_sq), rel=1e-9)
    # the base against itself: nothing changed, both forms 0
    assert weight_change_norm(WeightChangeNormSpec(base=str(base), relative=True),
                              _ctx(base)).estimate == 0.0


def test_not_applicable_and_bad_bases(dirs, tmp_path):
    base, ft, state = dirs
    with pytest.raises(NotApplicableError, match="not loaded from one"):
        weight_change_norm(WeightChangeNormSpec(), _ctx(None))
    with pytest.raises(NotApplicableError, match=r"no finetune\.json.*give base ="):
        weight_change_norm(WeightChangeNormSpec(), _ctx(base))
    other = tmp_path / "other"
    other.mkdir()
    save_file({"x": torch.zeros(2)}, str(other / "model.safetensors"))
    with pytest.raises(DataError, match="share no safetensors tensor key"):
        weight_change(ft, other)
    save_file({UP: torch.zeros(3, 3)}, str(other / "model.safetensors"))
    with pytest.raises(DataError, match=rf"tensor '{UP}' has shape \(64, 32\) in .* but \(3, 3\)"):
        weight_change(ft, other)
