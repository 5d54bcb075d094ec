"""The from-scratch biographies testbed: split counts, no OOD QA in training, vocabulary, exact rows."""

from __future__ import annotations

from collections import Counter

import pytest

from probekit.testbeds import get_task
from probekit.testbeds.bio_scratch import (
    ATTRIBUTES,
    EMPLOYER_CITY,
    BioScratch,
    BioScratchConfig,
    words,
)
from probekit.util.constraints import ConstraintError


def _kinds(ds):
    return Counter(ds.metadata["kind"])


@pytest.mark.parametrize("aug", [1, 2, 5])
def test_exact_counts_per_split(aug):
    s = BioScratch(BioScratchConfig(n_people=20, augmentation=aug)).splits()
    # 20 people x aug biographies; 10 ID people x 6 questions trained and in test_id; 10 OOD x 6
    assert _kinds(s["train"]) == {"bio": 20 * aug, "qa": 60}
    assert len(s["test_id"]) == len(s["test_ood"]) == 60
    assert len(s["probe_train"]) + len(s["probe_test"]) == 20 and len(s["probe_train"]) >= 10
    assert set(s) == {"train", "test_id", "test_ood", "probe_train", "probe_test"}


def test_no_ood_person_in_qa_training():
    s = BioScratch(BioScratchConfig(n_people=40, augmentation=3, seed=2)).splits()
    tr = s["train"].metadata
    qa_people = {p for p, k in zip(tr["person"], tr["kind"]) if k == "qa"}
    bio_people = {p for p, k in zip(tr["person"], tr["kind"]) if k == "bio"}
    ood, id_ = set(s["test_ood"].metadata["person"]), set(s["test_id"].metadata["person"])
    assert len(ood) == len(id_) == 20 and not ood & id_
    assert qa_people == id_ and bio_people == id_ | ood
    train_rows = {tuple(t) for t in s["train"].tokens}
    assert not train_rows & {tuple(t) for t in s["test_ood"].tokens}
    assert {tuple(t) for t in s["test_id"].tokens} <= train_rows
    probe = set(s["probe_train"].metadata["person"]), set(s["probe_test"].metadata["person"])
    assert not probe[0] & probe[1] and probe[0] | probe[1] == id_ | ood


def test_vocabulary_covers_every_row_and_answers_are_one_token():
    task = BioScratch(BioScratchConfig(n_people=60, n_values=12, augmentation=4))
    v = task.vocab
    used = {t for ds in task.splits().values() for row in ds.tokens for t in row}
    assert max(used) < len(v) and v.pad_id not in used
    for ds in (task.splits()["test_id"], task.splits()["test_ood"]):
        for tgt, ans in zip(ds.targets, ds.metadata["answer"]):
            assert v.decode(tgt) == ans.replace(" ", "_")
    # the vocabulary does not depend on the augmentation, the people or the seed (same d_vocab)
    other = BioScratch(BioScratchConfig(n_people=5, augmentation=1, seed=9)).vocab
    assert other.tokens == v.tokens


def test_constructed_person_exact_rows():
    task = BioScratch(BioScratchConfig(n_people=4, augmentation=3, permute=True))
    v, p = task.vocab, task.people[0]
    bios = task.biographies(p)
    assert len(bios) == 3
    # biography 1: canonical order, the name only in the first sentence, then "they"
    first = bios[0]
    assert first[:3] == p["name"].split() and first.count(".") == 6
    assert first.count("they") == 5 and " ".join(first).count(p["name"]) == 1
    values = [w for w in first if w in {x.replace(" ", "_") for a in ATTRIBUTES for x in ATTRIBUTES[a]}]
    assert values == [p[a].replace(" ", "_") for a in ATTRIBUTES]
    for bio in bios[1:]:  # every augmented biography states the same six values
        assert sorted(w for w in bio if w in values) == sorted(values)
    assert p["work_city"] == EMPLOYER_CITY[p["employer"]]
    s = task.splits()
    qa = s["test_id" if p["in_distribution"] else "test_ood"]
    i = qa.metadata["person"].index(0)
    assert v.decode(qa.tokens[i]) == "<bos> In which month was " + p["name"] + " born ? Answer:"
    assert qa.targets[i] == [v.id(p["birth_month"])] and qa.target_positions[i] == [len(qa.tokens[i]) - 1]
    probe = s["probe_train"] if 0 in s["probe_train"].metadata["person"] else s["probe_test"]
    j = probe.metadata["person"].index(0)
    assert v.decode(probe.prompt(j)) == "<bos> " + p["name"]  # the name's last token is last
    bio_row = s["train"].tokens[s["train"].metadata["person"].index(0)]
    assert bio_row == v.encode(["<bos>", *first]) and s["train"].targets[0] == bio_row[1:]


def test_fullname_and_no_permute():
    task = BioScratch(BioScratchConfig(n_people=4, augmentation=2, permute=False, fullname=True))
    p = task.people[1]
    for bio in task.biographies(p):
        assert " ".join(bio).count(p["name"]) == 6 and "they" not in bio
        vals = [p[a].replace(" ", "_") for a in ATTRIBUTES]
        assert [w for w in bio if w in vals] == vals  # canonical order in both


def test_n_values_limits_the_values_and_config_refuses_bad_values():
    people = BioScratch(BioScratchConfig(n_people=200, n_values=3)).people
    for a in ("birth_month", "birth_city", "major"):
        assert {q[a] for q in people} == set(ATTRIBUTES[a][:3])
    with pytest.raises(ConstraintError, match="n_values"):
        BioScratchConfig(n_values=13)
    with pytest.raises(ConstraintError, match="augmentation"):
        get_task("bio_scratch", augmentation=0)


def test_words_splits_punctuation():
    assert words("A b.\nAnswer: c?") == ["A", "b", ".", "Answer:", "c", "?"]


def test_model_config_fits_the_longest_row():
    task = get_task("bio_scratch", n_people=10, augmentation=2)
    cfg = task.model_config()
    assert cfg.n_ctx == max(ds.max_len for ds in task.splits().values())
    assert cfg.d_vocab == len(task.vocab)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_probe_test_value_occurs_in_probe_train(seed):
    s = BioScratch(BioScratchConfig(n_people=24, n_values=6, seed=seed)).splits()
    tr, te = s["probe_train"].metadata, s["probe_test"].metadata
    for a in ATTRIBUTES:
        assert set(te[a]) <= set(tr[a]), a
        everyone = Counter(tr[a]) + Counter(te[a])
        assert all(n >= 2 for v, n in Counter(tr[a]).items() if everyone[v] >= 2), a
    assert len(tr["person"]) + len(te["person"]) == 24 and len(te["person"]) >= 4
