"""ReplaceByToken: each cell takes its input token's row of a table (e.g. an edited embedding)."""

import pytest
import torch

from probekit.capture import Site
from probekit.errors import DataError
from probekit.interventions import Read, ReplaceByToken, run_with_interventions
from tests.conftest import random_sequences


@pytest.mark.parametrize("side", ["left", "right"])
def test_replace_by_token_is_a_lookup_in_unpadded_coordinates(tiny_model, side):
    model = tiny_model
    embed = Site.parse("embed")
    toks = random_sequences(4, model.cfg.d_vocab, lo=2, hi=6, seed=3)
    table = torch.randn(model.cfg.d_vocab, model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    got = run_with_interventions(model, toks, [ReplaceByToken(site=embed, table=table), Read(site=embed)],
                                 padding_side=side, logits="none").reads[embed]
    for i, seq in enumerate(toks):
        torch.testing.assert_close(got[i, : len(seq)], table[torch.tensor(seq)].to(got.dtype))
    # the table of the model's own embedding changes nothing downstream
    same = run_with_interventions(model, toks, [ReplaceByToken(site=embed, table=model.W_E.detach())],
                                  padding_side=side).output
    plain = run_with_interventions(model, toks, padding_side=side).output
    torch.testing.assert_close(same, plain)


def test_replace_by_token_errors(tiny_model):
    embed = Site.parse("embed")
    d = tiny_model.cfg.d_model
    with pytest.raises(DataError, match="one row per vocabulary entry"):
        run_with_interventions(tiny_model, [[tiny_model.cfg.d_vocab - 1]],
                               [ReplaceByToken(site=embed, table=torch.zeros(2, d))])
    with pytest.raises(DataError, match=r"\(d_vocab, \*feat\)"):
        run_with_interventions(tiny_model, [[1]], [ReplaceByToken(site=embed, table=torch.zeros(8, d + 1))])
