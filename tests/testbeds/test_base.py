import pytest
import torch

from probekit.testbeds import IGNORE_INDEX, TaskDataset, Vocab, get_task, task_names


def test_vocab_round_trip_and_errors():
    v = Vocab(tokens=("<pad>", "a", "b"))
    assert v.pad_id == 0 and v.encode("a b") == [1, 2] and v.decode([1, 2, 0], skip_pad=True) == "a b"
    assert Vocab.from_dict(v.to_dict()) == v
    with pytest.raises(KeyError, match="'c'"):
        v.encode("c")
    with pytest.raises(ValueError, match="twice"):
        Vocab(tokens=("<pad>", "a", "a"))
    with pytest.raises(ValueError, match="pad"):
        Vocab(tokens=("a",))


def test_dataset_validation_and_padding():
    ds = TaskDataset(name="x", tokens=[[1, 2], [3]], targets=[[5], [6]], target_positions=[[1], [0]],
                     metadata={"k": [0, 1]})
    b = ds.to_tensors(pad_id=0)
    assert b.tokens.tolist() == [[1, 2], [3, 0]]
    assert b.labels.tolist() == [[IGNORE_INDEX, 5], [6, IGNORE_INDEX]]
    assert ds.subset([1]).tokens == [[3]] and ds.subset([1]).metadata == {"k": [1]}
    with pytest.raises(ValueError, match="metadata column 'k'"):
        TaskDataset(name="x", tokens=[[1]], targets=[[1]], target_positions=[[0]], metadata={"k": []})
    with pytest.raises(ValueError, match="outside"):
        TaskDataset(name="x", tokens=[[1]], targets=[[1]], target_positions=[[3]])


SMALL = {
    "modular_addition": {"p": 7},
    "scan": {"n_ood_per_length": 5, "ood_lengths": (5, 6), "n_ood_combo": 5},
    "kg_composition": {"n_entities": 30, "n_relations": 8, "out_degree": 4, "phi": 2.0,
                       "test_id_fraction": 0.05, "ood_fraction": 0.2},
    "kg_comparison": {"n_entities": 30, "n_attributes": 3, "n_values": 5, "phi": 2.0, "n_test": 50},
    "relation_facts": {"n_entities": 20, "n_relations": 3, "out_degree": 3},
    "bio_scratch": {"n_people": 24, "n_values": 3, "augmentation": 2},
}


@pytest.mark.parametrize("name", task_names())
def test_every_task_has_consistent_splits(name):
    task = get_task(name, **SMALL[name])
    splits = task.splits()
    assert "train" in splits and len(splits["train"]) > 0
    mc = task.model_config()
    assert mc.d_vocab == len(task.vocab)
    for ds in splits.values():
        assert ds.max_len <= mc.n_ctx
        b = ds.to_tensors(task.vocab.pad_id)
        assert int(b.tokens.max()) < len(task.vocab)
        assert torch.equal((b.labels != IGNORE_INDEX).sum(1), torch.tensor([len(t) for t in ds.targets]))


def test_get_task_turns_toml_lists_into_config_tuples():
    from probekit.testbeds import get_task

    task = get_task("scan", ood_lengths=[5, 6], train_clauses=[1, 2])
    assert task.config.ood_lengths == (5, 6) and task.config.train_clauses == (1, 2)
    assert set(task.splits()) >= {"ood_len_5", "ood_len_6"}
