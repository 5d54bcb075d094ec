import pytest
import torch

from probekit.capture import pad_batch
from probekit.capture.generate import (
    greedy_continuations,
    greedy_decode,
    is_correct,
    plain_last_logits,
)
from probekit.errors import ConfigError


@pytest.mark.parametrize(
    "answer, gold, expected",
    [
        (" Paris.", "Paris", True),
        (" Paris, France\nQ:", "Paris", True),
        (" paris", "Paris", True),
        (" Lyon", "Paris", False),
        (" Parisian", "Paris", False),
        (" I don't know", "Paris", False),
        (" 71", "71", True),
        (" 710", "71", False),
        (" New York City", "New York|NYC", True),
        (" NYC", "New York|NYC", True),
        ("", "Paris", False),
    ],
)
def test_is_correct(answer, gold, expected):
    assert is_correct(answer, gold) is expected


def test_greedy_continuations_match_unbatched_argmax(small_model):
    prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    got = greedy_continuations(small_model, prompts, max_new_tokens=3, batch_size=3)
    for prompt, cont in zip(prompts, got):
        ids = list(prompt)
        for _ in range(3):
            ids.append(int(small_model(torch.tensor([ids]))[0, -1].argmax()))
        assert cont == ids[len(prompt):]


def test_greedy_decode_falls_back_to_rerunning_when_the_cache_stays_empty(small_model):
    """transformer-lens 4.3 on transformers >= 5.24 leaves the cache empty: decode by re-running."""
    prompts = [[1, 2, 3], [5, 6, 7, 8, 9]]
    want = greedy_continuations(small_model, prompts, max_new_tokens=3, batch_size=2)
    plain = plain_last_logits(small_model)
    calls = []

    def forward(batch, kv_cache, kv_mask):  # ignores the cache, as the broken bridge does
        calls.append((batch.input_ids.shape[1], kv_cache is not None))
        return plain(batch, None, None)

    batch = pad_batch(prompts, pad_id=0, side="right")
    with torch.inference_mode():
        got = greedy_decode(batch, 3, forward, cached=True, pad_id=0)
    assert got == want
    assert calls == [(5, True), (5, False), (6, False), (7, False)]  # one wasted cached pass, then re-runs


def test_greedy_decode_right_pads_and_reads_each_rows_last_token(small_model):
    prompts = [[4], [5, 6, 7, 8, 9], [1, 2]]
    batch = pad_batch(prompts, pad_id=0, side="right")
    with torch.inference_mode():
        got = greedy_decode(batch, 2, plain_last_logits(small_model), cached=False, pad_id=0)
        first = [int(small_model(torch.tensor([p]))[0, -1].argmax()) for p in prompts]
    assert [c[0] for c in got] == first


def test_greedy_continuations_refuse_a_forced_cache_on_a_tl_native_model(small_model):
    with pytest.raises(ConfigError, match="supports_kv_mask"):
        greedy_continuations(small_model, [[1, 2]], max_new_tokens=2, kv_cache=True)


def test_cached_greedy_continuations_equal_rerunning_and_one_forward(tiny_hf):
    prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11], [12, 13]]  # right-padded: rows of 1..7 tokens
    cached = greedy_continuations(tiny_hf, prompts, max_new_tokens=6, batch_size=4)
    assert cached == greedy_continuations(tiny_hf, prompts, max_new_tokens=6, batch_size=4, kv_cache=False)
    with torch.inference_mode():
        for prompt, cont in zip(prompts, cached, strict=True):
            logits = tiny_hf(torch.tensor([prompt + cont]))[0]
            assert logits[len(prompt) - 1:-1].argmax(-1).tolist() == cont
    assert len({tuple(c) for c in cached}) > 1  # not one constant continuation
