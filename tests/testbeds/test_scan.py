import pytest

from probekit.testbeds import ScanConfig, ScanTask, interpret_command

NOISE = {"foo", "bar", "baz"}
REPEAT = {"twice": 2, "thrice": 3}


def brute_force(command: str) -> list[str]:
    """Independent reference: drop noise, split on 'then', expand each clause."""
    words = [w for w in command.split() if w not in NOISE]
    out, clause = [], []
    for w in [*words, "then"]:
        if w != "then":
            clause.append(w)
            continue
        prim, *mod = clause
        out += [prim.upper()] * (REPEAT[mod[0]] if mod else 1)
        clause = []
    return out


def _task(**kw):
    base = dict(n_ood_per_length=40, n_ood_combo=40)
    base.update(kw)
    return ScanTask(ScanConfig(**base))


@pytest.fixture(scope="module")
def noisy():
    return _task(n_noise=3, train_clauses=(1, 2, 3), max_samples=300, seed=3).splits()


def test_outputs_match_brute_force_interpreter(noisy):
    for ds in noisy.values():
        for cmd, out in zip(ds.metadata["command"], ds.metadata["output"]):
            assert out.split() == brute_force(cmd) == interpret_command(cmd)


def test_split_structure(noisy):
    train = set(noisy["train"].metadata["command"])
    test = set(noisy["test_id"].metadata["command"])
    assert train and test and not train & test
    assert set(noisy["train"].metadata["n_clauses"]) == {1, 2, 3}
    for n in range(5, 13):
        ds = noisy[f"ood_len_{n}"]
        assert len(ds) == 40 and set(ds.metadata["n_clauses"]) == {n}
        assert all(not p for p in ds.metadata["noise_positions"])  # OOD has no noise
    for name in ("train", "test_id", "ood_prim_mod"):
        assert all(len(p) == 3 for p in noisy[name].metadata["noise_positions"])
    for ds in noisy.values():
        assert len(set(ds.metadata["command"])) == len(ds)  # deduplicated


def test_held_out_combos_only_in_ood_prim_mod(noisy):
    def combos(ds):
        return [set(zip(p, m)) for p, m in zip(ds.metadata["primitives"], ds.metadata["modifiers"])]

    for name, ds in noisy.items():
        has = [("jump", "thrice") in c for c in combos(ds)]
        assert has == ds.metadata["has_held_out_combo"]
        if name == "ood_prim_mod":
            assert all(has) and len(ds) == 40
        else:
            assert not any(has)


def test_parse_metadata_spans(noisy):
    vocab_words = {"walk", "jump", "look", "turn"}
    for ds in noisy.values():
        for i, cmd in enumerate(ds.metadata["command"]):
            w = cmd.split()
            md = {k: v[i] for k, v in ds.metadata.items()}
            assert [w[j] for j in md["prim_positions"]] == md["primitives"]
            for j, m in zip(md["mod_positions"], md["modifiers"]):
                assert (j is None and m is None) or w[j] == m
            for (s, e), p in zip(md["clause_spans"], md["primitives"]):
                assert w[s] == p and w[e - 1] in vocab_words | set(REPEAT)
            assert [w[j] for j in md["then_positions"]] == ["then"] * (md["n_clauses"] - 1)
            assert all(w[j] in NOISE for j in md["noise_positions"])
            parts = md["part_spans"]  # contiguous cover of the input, split at primitives
            assert parts[0][0] == 0 and parts[-1][1] == len(w)
            assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
            out = md["output"].split()
            for (s, e), p in zip(md["output_spans"], md["primitives"]):
                assert out[s:e] == [p.upper()] * (e - s)
            assert md["output_spans"][-1][1] == len(out)
            assert md["first_primitive"] == w[md["prim_positions"][0]] == out[0].lower()
            second = md["second_prim_position"]
            assert (second is None) == (md["n_clauses"] == 1)
            assert second is None or w[second] == md["primitives"][1]


def test_objective_alignment():
    pad = _task().splits()
    t = _task(alignment="truncate").splits()
    vocab = ScanTask().vocab
    for i in range(20):
        ds = pad["train"]
        out = vocab.encode(ds.metadata["output"][i])
        assert ds.targets[i] == out and ds.target_positions[i] == list(range(len(out)))
        assert len(ds.tokens[i]) == max(ds.metadata["input_len"][i], len(out))
        assert ds.tokens[i][: ds.metadata["input_len"][i]] == vocab.encode(ds.metadata["command"][i])
        ds = t["train"]
        n = min(ds.metadata["input_len"][i], ds.metadata["output_len"][i])
        assert ds.target_positions[i] == list(range(n)) and len(ds.tokens[i]) == ds.metadata["input_len"][i]


def test_deterministic_and_seed_dependent():
    a = _task(n_noise=2, seed=0).splits()
    b = _task(n_noise=2, seed=0).splits()
    c = _task(n_noise=2, seed=1).splits()
    assert all(a[k].tokens == b[k].tokens for k in a)
    assert a["train"].tokens != c["train"].tokens


def test_extra_primitives_and_coverage():
    task = _task(extra_primitives=("run",), train_clauses=(1,))
    assert "RUN" in task.vocab.tokens
    prims = {p for ps in task.splits()["train"].metadata["primitives"] for p in ps}
    assert "run" in prims


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"n_noise": -1}, "n_noise"),
        ({"train_clauses": (2, 5)}, "ood_lengths"),
        ({"held_out_combos": (("fly", "twice"),)}, "held_out_combos"),
        ({"alignment": "left"}, "alignment"),
        ({"test_id_fraction": 1.0}, "test_id_fraction"),
        ({"extra_primitives": ("then",)}, "then"),
        ({"max_samples": 0}, "max_samples"),
    ],
)
def test_bad_config_names_field(kw, field):
    with pytest.raises(ValueError, match=field):
        ScanConfig(**kw)
