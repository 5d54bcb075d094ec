import pytest
import torch

from probekit.models.generate import greedy_continuations, is_correct


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
