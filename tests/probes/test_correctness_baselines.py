import numpy as np
import torch

from probekit.capture import pad_batch
from probekit.probes.correctness_baselines import answer_confidence
from tests.conftest import build_tiny_hf, random_sequences


def _max_softmax_alone(model, prompts):
    with torch.inference_mode():
        return np.array([float(torch.softmax(model(torch.tensor([p]))[0, -1].double(), -1).max())
                         for p in prompts])


def test_answer_confidence_equals_each_prompt_run_alone(small_model):
    prompts = random_sequences(7, small_model.cfg.d_vocab, lo=1, hi=9, seed=4)  # padded batches
    got = answer_confidence(small_model, prompts, batch_size=3)
    np.testing.assert_allclose(got, _max_softmax_alone(small_model, prompts), rtol=0, atol=1e-6)
    assert got.std() > 0


def test_answer_confidence_of_a_float64_hf_model_is_finite(tmp_path):
    """Left padding of a float64 HF model gives NaN at pad queries (pitfalls); the batches are right-padded."""
    model = build_tiny_hf(tmp_path, "llama", dtype=torch.float64)
    prompts = [[1, 2, 3, 4, 5, 6], [7, 8], [9, 10, 11]]
    left = pad_batch(prompts, pad_id=0, side="left")
    with torch.inference_mode():  # the upstream behaviour
        raw = model(left.input_ids, attention_mask=left.attention_mask)
    assert bool(torch.isnan(raw[1:, -1]).any())
    got = answer_confidence(model, prompts, batch_size=3)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _max_softmax_alone(model, prompts), rtol=0, atol=1e-9)
