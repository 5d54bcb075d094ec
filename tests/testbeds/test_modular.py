import pytest

from probekit.testbeds import ModularAddition, ModularAdditionConfig, get_task


def _task(**kw):
    return ModularAddition(ModularAdditionConfig(**kw))


def test_splits_partition_all_pairs_and_answers_are_correct():
    p = 13
    s = _task(p=p, train_fraction=0.3, seed=1).splits()
    train = {(a, b) for a, b in zip(s["train"].metadata["a"], s["train"].metadata["b"])}
    test = {(a, b) for a, b in zip(s["test_id"].metadata["a"], s["test_id"].metadata["b"])}
    assert not train & test
    assert train | test == {(a, b) for a in range(p) for b in range(p)}
    assert len(train) == round(0.3 * p * p)
    for ds in s.values():
        for tok, tgt, pos, c in zip(ds.tokens, ds.targets, ds.target_positions, ds.metadata["answer"]):
            a, b, eq = tok
            assert eq == p and tgt == [(a + b) % p] and pos == [2] and c == (a + b) % p


def test_vocab_and_model_config():
    task = _task(p=7)
    assert task.vocab.decode([3, 4, 7]) == "3 4 ="
    assert task.vocab.encode("3 4 =") == [3, 4, 7]
    mc = task.model_config()
    assert (mc.n_layers, mc.d_model, mc.n_heads, mc.d_head, mc.d_mlp) == (1, 128, 4, 32, 512)
    assert mc.normalization_type is None and mc.act_fn == "relu" and mc.d_vocab == len(task.vocab)


def test_deterministic_for_seed_and_different_across_seeds():
    a = _task(p=11, seed=0).splits()["train"].tokens
    b = _task(p=11, seed=0).splits()["train"].tokens
    c = _task(p=11, seed=1).splits()["train"].tokens
    assert a == b and a != c


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"p": 1}, "p"), ({"train_fraction": 1.5}, "train_fraction"), ({"train_fraction": 0.0}, "train_fraction")],
)
def test_bad_config_names_field(kw, field):
    with pytest.raises(ValueError, match=field):
        ModularAdditionConfig(**kw)


def test_registry_errors():
    with pytest.raises(ValueError, match=r"unknown task 'modular_subtraction' \(did you mean "
                       r"'modular_addition'\?\); registered tasks are .*'modular_addition'"):
        get_task("modular_subtraction")
    with pytest.raises(ValueError, match="prime"):
        get_task("modular_addition", prime=7)
    assert get_task("modular_addition", p=7).config.p == 7
