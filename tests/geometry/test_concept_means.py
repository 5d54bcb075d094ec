"""Uselis et al.'s concept-mean scores: their released code's numbers (fixture), planted cases."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from factorization_cases import SYNTHETIC, grid

from probekit.errors import DataError
from probekit.geometry import concept_means_scores

REF = json.loads((Path(__file__).parent / "uselis_reference.json").read_text())["cases"]
CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


def _check(got, ref: dict) -> None:
    # the reference runs in float32: 1e-6 on R2 and |cos|; whitening multiplies float32
    # rounding in near-null directions by up to 3e4, hence 1e-3 there
    assert float(got.linear_r2[0]) == pytest.approx(ref["linear_r2"], abs=1e-6)
    assert float(got.linear_r2_whitened[0]) == pytest.approx(ref["linear_r2_whitened"], abs=1e-3)
    assert got.k95[0].tolist() == ref["k95"]
    assert float(got.same_concept_abs_cos[0]) == pytest.approx(ref["same_concept_abs_cos"], abs=1e-6)
    assert float(got.cross_concept_abs_cos[0]) == pytest.approx(ref["cross_concept_abs_cos"],
                                                                abs=1e-6)


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_matches_the_papers_code_on_constructed_cases(name):
    z, a, b = grid(**SYNTHETIC[name])
    _check(concept_means_scores(z, [a, b]), REF[name])


@pytest.mark.skipif(not CHECKPOINT.exists(), reason="modadd checkpoint not present")
def test_matches_the_papers_code_on_modadd_activations():
    from probekit.capture import LastToken, Site, collect_activations
    from probekit.models import load_checkpoint
    from probekit.testbeds import get_task

    model = load_checkpoint(CHECKPOINT)
    train = get_task("modular_addition", p=53, seed=0, train_fraction=0.6).splits()["train"]
    sites = [Site(0, "resid_mid"), Site(0, "mlp_post"), Site(0, "resid_post")]
    with torch.no_grad():
        acts = collect_activations(model, train.tokens, sites, positions=LastToken(),
                                   batch_size=512)
    a, b = np.asarray(train.metadata["a"]), np.asarray(train.metadata["b"])
    for s in sites:
        _check(concept_means_scores(acts[s].double(), [a, b]), REF[f"modadd_{s.kind}@0"])


def test_planted_factorized_vs_interacting():
    z, a, b = grid()  # z = mu + u_a + v_b, u and v in orthogonal rank-2 / rank-3 subspaces
    zi, *_ = grid(interaction=2.0)
    got = concept_means_scores(torch.stack([z, zi]), [a, b])
    assert float(got.linear_r2[0]) == pytest.approx(1.0, abs=1e-9)
    assert float(got.linear_r2_whitened[0]) == pytest.approx(1.0, abs=1e-9)
    assert float(got.cross_concept_abs_cos[0]) == pytest.approx(0.0, abs=1e-9)
    assert got.k95[0].tolist() == [2, 3]
    assert float(got.linear_r2[1]) < 0.6 and float(got.cross_concept_abs_cos[1]) > 0.1
    # invariant to rotation and translation of the state space
    q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64,
                                       generator=torch.Generator().manual_seed(3)))
    moved = concept_means_scores(torch.stack([z, zi]) @ q + 2.0, [a, b])
    torch.testing.assert_close(moved.linear_r2, got.linear_r2)
    torch.testing.assert_close(moved.cross_concept_abs_cos, got.cross_concept_abs_cos)
    assert moved.k95.tolist() == got.k95.tolist()


def test_bad_input_raises():
    z, a, b = grid()
    with pytest.raises(DataError, match="at least two concept"):
        concept_means_scores(z, [a])
    with pytest.raises(DataError, match="one per row"):
        concept_means_scores(z, [a, b[:-1]])
    with pytest.raises(DataError, match="at least 2"):
        concept_means_scores(z, [a, np.zeros_like(b)])
