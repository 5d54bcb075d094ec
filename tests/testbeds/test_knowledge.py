import numpy as np
import pytest

from probekit.testbeds import (
    KGComparisonConfig,
    KGCompositionConfig,
    KnowledgeComparison,
    KnowledgeComposition,
    RelationFacts,
    RelationFactsConfig,
)
from probekit.testbeds.knowledge import consecutive_pairs

COMP = dict(n_entities=80, n_relations=12, out_degree=6, phi=3.0, ood_fraction=0.2,
            test_id_fraction=0.05, seed=4)


@pytest.fixture(scope="module")
def comp():
    return KnowledgeComposition(KGCompositionConfig(**COMP))


def _atomic_map(task):
    f = task.atomic_facts
    return {(int(h), int(r)): (int(t), bool(o)) for h, r, t, o in zip(f.head, f.relation, f.tail, f.is_ood)}


def test_composition_graph_shape(comp):
    f = comp.atomic_facts
    assert f.head.size == 80 * 6
    for h in range(80):
        rels = f.relation[f.head == h]
        assert len(set(rels.tolist())) == 6  # distinct relations per entity
    assert int(f.is_ood.sum()) == round(0.2 * 80 * 6)


def test_composition_two_hop_answers_bridges_and_splits(comp):
    facts = _atomic_map(comp)
    s = comp.splits()
    v = comp.vocab
    seen = {}
    for name, ds in s.items():
        md = ds.metadata
        for i in range(len(ds)):
            h, r1, t = md["h"][i], md["r1"][i], md["t"][i]
            if md["hop"][i] == 1:
                assert name == "train" and facts[(h, r1)][0] == t
                assert ds.tokens[i] == [comp.entity_id(h), comp.relation_id(r1), comp.entity_id(t)]
                continue
            r2, b = md["r2"][i], md["bridge"][i]
            b_true, ood1 = facts[(h, r1)]
            t_true, ood2 = facts[(b, r2)]
            assert b == b_true and t == t_true  # two-hop answer = r2(r1(h))
            assert ds.tokens[i] == [comp.entity_id(h), comp.relation_id(r1), comp.relation_id(r2),
                                    comp.entity_id(t)]
            assert ds.targets[i] == [comp.entity_id(t), v.id("</a>")]
            assert ds.target_positions[i] == [2, 3]
            if name == "test_ood":
                assert ood1 and ood2 and md["ood"][i]  # only OOD atomic facts
            else:
                assert not ood1 and not ood2
            key = (h, r1, r2)
            assert key not in seen, f"{key} in {seen.get(key)} and {name}"
            seen[key] = name


def test_composition_counts_and_phi(comp):
    s = comp.splits()
    f = comp.atomic_facts
    hop = np.array(s["train"].metadata["hop"])
    n_id_atomic = int((~f.is_ood).sum())
    assert (hop == 1).sum() == f.head.size  # all atomic facts trained, ID and OOD
    assert (hop == 2).sum() == round(3.0 * n_id_atomic)  # phi x |ID atomic|
    # ID two-hop total = pool + test_id, test share 5 %
    facts = _atomic_map(comp)
    n_id = n_ood = 0
    for (_h, _r1), (b, o1) in facts.items():
        for (b2, _r2), (_, o2) in facts.items():
            if b2 == b:
                n_id += (not o1) and (not o2)
                n_ood += o1 and o2
    assert len(s["test_id"]) == round(0.05 * n_id)
    assert len(s["test_ood"]) == n_ood


def test_consecutive_pairs_exact():
    pid, role = consecutive_pairs([5, 7, 3, 3, 9, 2, 4])
    # rows 2-3 share their answer (no logit difference): unpaired; row 6 is the odd last row
    assert pid == [0, 0, None, None, 2, 2, None]
    assert role == ["clean", "corrupt", None, None, "clean", "corrupt", None]
    assert consecutive_pairs([]) == ([], [])


def test_composition_answer_and_pair_columns(comp):
    s = comp.splits()
    for name, ds in s.items():
        md = ds.metadata
        assert md["answer"] == [comp.entity_id(t) for t in md["t"]]
        if name != "test_id":
            assert set(md["pair_id"]) == {None} and set(md["role"]) == {None}
    md = s["test_id"].metadata
    pairs: dict = {}
    for i, (p, r) in enumerate(zip(md["pair_id"], md["role"])):
        if p is not None:
            pairs.setdefault(p, {})[r] = i
    assert len(pairs) >= 0.4 * len(md["t"])  # most consecutive queries have different answers
    for p, rows in pairs.items():
        assert rows == {"clean": 2 * p, "corrupt": 2 * p + 1}
        assert md["t"][rows["clean"]] != md["t"][rows["corrupt"]]
    unpaired = [k for k in range(len(md["t"]) // 2) if k not in pairs]
    assert all(md["t"][2 * k] == md["t"][2 * k + 1] for k in unpaired)


def test_composition_determinism_and_errors():
    a = KnowledgeComposition(KGCompositionConfig(**COMP)).splits()["train"].tokens
    b = KnowledgeComposition(KGCompositionConfig(**COMP)).splits()["train"].tokens
    c = KnowledgeComposition(KGCompositionConfig(**{**COMP, "seed": 5})).splits()["train"].tokens
    assert a == b and a != c
    with pytest.raises(ValueError, match="phi"):
        KnowledgeComposition(KGCompositionConfig(**{**COMP, "phi": 50.0})).splits()
    with pytest.raises(ValueError, match="out_degree"):
        KGCompositionConfig(n_relations=5, out_degree=6)
    with pytest.raises(ValueError, match="ood_fraction"):
        KGCompositionConfig(ood_fraction=0.0)


CMP = dict(n_entities=40, n_attributes=3, n_values=6, phi=4.0, n_test=200, seed=2)


def test_comparison_labels_and_splits():
    task = KnowledgeComparison(KGComparisonConfig(**CMP))
    s = task.splits()
    seen = {}
    for name, ds in s.items():
        md = ds.metadata
        for i in range(len(ds)):
            a, e1 = md["attribute"][i], md["e1"][i]
            if md["hop"][i] == 1:
                assert name == "train" and md["v1"][i] == task.values[e1, a]
                assert ds.targets[i] == [task.value_id(task.values[e1, a]), task.end_id]
                continue
            e2 = md["e2"][i]
            v1, v2 = task.values[e1, a], task.values[e2, a]
            label = 0 if v1 < v2 else (1 if v1 == v2 else 2)
            assert e1 != e2 and md["label"][i] == label
            assert ds.tokens[i][:3] == [task.attribute_id(a), task.entity_id(e1), task.entity_id(e2)]
            assert ds.targets[i] == [task.label_id(a, label), task.end_id]
            ood = (task.is_ood[e1, a], task.is_ood[e2, a])
            assert ood == ((True, True) if name == "test_ood" else (False, False))
            assert (a, e1, e2) not in seen
            seen[(a, e1, e2)] = name
    hop = np.array(s["train"].metadata["hop"])
    assert (hop == 1).sum() == 40 * 3
    assert (hop == 2).sum() == round(4.0 * int((~task.is_ood).sum()))
    assert (task.is_ood.sum(0) == round(0.1 * 40)).all()  # per-attribute 90/10 entity split
    labels = s["train"].metadata["label"]
    assert {0, 1, 2} <= set(labels)
    pairs = {(a, e1, e2) for a, e1, e2, h in zip(s["train"].metadata["attribute"], s["train"].metadata["e1"],
                                                 s["train"].metadata["e2"], hop) if h == 2}
    assert any((a, e2, e1) in pairs for a, e1, e2 in pairs)  # both orders occur


def test_comparison_errors():
    with pytest.raises(ValueError, match="phi"):
        KnowledgeComparison(KGComparisonConfig(**{**CMP, "phi": 1e6})).splits()
    with pytest.raises(ValueError, match="n_values"):
        KGComparisonConfig(n_values=1)


def test_relation_facts():
    task = RelationFacts(RelationFactsConfig(n_entities=30, n_relations=5, out_degree=4, test_fraction=0.2))
    s = task.splits()
    assert len(s["train"]) + len(s["test_id"]) == 120
    keys = {}
    for name, ds in s.items():
        for tok, sub, rel, obj in zip(ds.tokens, ds.metadata["subject"], ds.metadata["relation"],
                                      ds.metadata["object"]):
            assert tok == [task.entity_id(sub), task.relation_id(rel), task.entity_id(obj)]
            assert task.vocab.tokens[tok[1]] == f"<r{rel}>"
            assert (sub, rel) not in keys
            keys[(sub, rel)] = name
    with pytest.raises(ValueError, match="test_fraction"):
        RelationFactsConfig(test_fraction=1.0)
