"""Answers as token ids (:mod:`probekit.capture.answers`), on a fake tokenizer."""

import pytest
import torch

from probekit.capture.answers import answer_ids, answer_token, answer_token_ids, reduction_warning
from probekit.errors import ConfigError, DataError


class _Vocab:
    tokens = ("a", "b")

    def id(self, token):
        return self.tokens.index(token)


class _Model:
    """``to_tokens`` splits on spaces: word ``w`` is token ``len(w)``."""

    tokenizer = type("Tok", (), {"decode": staticmethod(lambda ids: f"<{ids[0]}>")})()

    def to_tokens(self, text, prepend_bos=False):
        return torch.tensor([[len(w) for w in text.split()]])


def test_ids_from_ints_the_vocabulary_and_the_tokenizer():
    model = _Model()
    assert answer_token_ids(model, 7) == [7] and answer_token_ids(model, "b", _Vocab()) == [1]
    assert answer_token_ids(model, "xyz pq") == [3, 2]
    with pytest.raises(ConfigError, match="answer 'b' is text but the model has no tokenizer"):
        answer_token_ids(object(), "b")


def test_a_multi_token_answer_is_refused_or_reduced_to_its_first_token():
    model = _Model()
    with pytest.raises(DataError, match=r"^row 3: answer 'xyz pq' is 2 tokens \[3, 2\] \['<3>', '<2>'\]"):
        answer_token(model, "xyz pq", where="row 3")
    assert answer_token(model, "xyz pq", answer_tokens="first") == 3
    ids, reduced = answer_ids(model, ["xyz pq", 5], ["row 0", "row 1"], answer_tokens="first")
    assert ids == [3, 5] and reduced == ["row 0: 'xyz pq'"]
    assert reduction_warning(reduced, 2) == (
        "1 of 2 answers have several tokens and are scored by their first token only "
        "(answer_tokens = \"first\"): row 0: 'xyz pq'")
    with pytest.raises(DataError, match="answer '' has no tokens"):
        answer_token(model, "")
