import pytest
import torch

from probekit.capture.generate import greedy_continuations, is_correct


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


class _EmptyCache:
    """What transformer-lens 4.3 on transformers >= 5.24 returns: a cache that holds nothing."""

    def get_seq_length(self) -> int:
        return 0


class _EmptyCacheModel:
    """``small_model`` that claims KV-cache support but returns an empty cache."""

    def __init__(self, model):
        self.model = model
        self.tokenizer = getattr(model, "tokenizer", None)
        self.cfg = model.cfg

    @property
    def hook_dict(self):
        return self.model.hook_dict

    def hooks(self, *args, **kwargs):
        return self.model.hooks(*args, **kwargs)

    def to_tokens(self, *args, **kwargs):
        return self.model.to_tokens(*args, **kwargs)

    def __call__(self, ids, attention_mask=None, return_type=None, past_key_values=None, **kw):
        logits = self.model(ids, attention_mask=attention_mask)
        return (logits, _EmptyCache()) if return_type == "logits_and_cache" else logits


def test_greedy_falls_back_to_rerunning_when_the_cache_stays_empty(small_model):
    prompts = [[1, 2, 3], [5, 6, 7, 8, 9]]
    want = greedy_continuations(small_model, prompts, max_new_tokens=3, batch_size=2)
    got = greedy_continuations(_EmptyCacheModel(small_model), prompts, max_new_tokens=3, batch_size=2)
    assert got == want
