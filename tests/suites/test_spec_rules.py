"""Every probe-suite key has a load-time rule (issue 59 item 2, pattern 2).

A key without one reached numpy or sklearn (``max_per_split = -1``, ``sites = []``, ``Cs = 0``,
``[stats] seed = -1``). The walk below visits every section and every registered analysis and
requires each numeric or list key to declare its rule (:mod:`probekit.util.constraints`) or to
be checked in its own ``__post_init__`` (listed); then one bad value per key is refused at its
line by ``build_table``.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from probekit.suites.registry import registered
from probekit.suites.spec import _SECTIONS, SuiteError, TrainSpec, build_table
from probekit.util.constraints import constraints_of, keys_of

#: numeric / list keys whose rule is not a declared constraint: the spec checks them itself
CHECKED_ELSEWHERE = {
    ("PatchingSpec", "kinds"),  # unknown kind, none, twice: one message listing PATCH_KINDS
    ("LayerSimilaritySpec", "sites"), ("LayerSimilaritySpec", "drift_sites"),  # Distinct; parsed at run
    ("CaptureSpec", "sites"),  # check_capture_sites: kinds, twice, two spellings of one site
    ("HomomorphismSpec", "layer"),  # a block index, negative from the end: checked on the states
}
#: free values: any number is meaningful
FREE = {("ExecutionSpec", "options")}


def _classes() -> list[type]:
    out = [c for c in _SECTIONS.values() if c is not None] + [TrainSpec]
    out += [a.spec for a in registered().values()
            if a.spec.__module__.startswith("probekit.")]  # not a test's own registrations
    return list(dict.fromkeys(out))


def _numeric_or_list(annotation) -> bool:
    inner = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return any(a in (int, float) or typing.get_origin(a) is tuple for a in inner)


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_every_numeric_or_list_key_declares_its_rule(cls):
    rules = constraints_of(cls)
    keys = set(keys_of(cls))
    bare = [name for name, (annotation, found) in rules.items()
            if name in keys and _numeric_or_list(annotation) and not found
            and (cls.__name__, name) not in CHECKED_ELSEWHERE | FREE
            and typing.get_origin(annotation) is not typing.Literal
            and not (typing.get_origin(annotation) is tuple
                     and typing.get_origin(typing.get_args(annotation)[0]) is typing.Literal)]
    assert not bare, f"{cls.__name__}: keys without a declared rule: {bare}"


@pytest.mark.parametrize(("cls", "section", "table", "message"), [
    ("DataSpec", "data", {"label": "y", "max_per_split": -1}, "max_per_split = -1: must be >= 1"),
    ("DataSpec", "data", {"label": "y", "max_per_split": 0}, "max_per_split = 0: must be >= 1"),
    ("DataSpec", "data", {"label": "y", "holdout_fraction": 1.0}, "holdout_fraction = 1.0: must be in (0, 1)"),
    ("DataSpec", "data", {"label": ""}, "label = '': must be non-empty (a column name)"),
    ("DataSpec", "data", {"label": "y", "seed": -1}, "seed = -1: must be in [0, 4294967296)"),
    ("DataSpec", "data", {"label": "y", "ood_splits": ["a", ""]}, "ood_splits = ['a', '']: must be all non-empty"),
    ("CaptureSpec", "capture", {"sites": []}, "sites = []: must be non-empty"),
    ("CaptureSpec", "capture", {"batch_size": 0}, "batch_size = 0: must be >= 1"),
    ("StatsSpec", "stats", {"seed": -1}, "seed = -1: must be in [0, 4294967296)"),
    ("StatsSpec", "stats", {"n_permutations": 0}, "n_permutations = 0: must be >= 1"),
    ("StatsSpec", "stats", {"alpha": 1.0}, "alpha = 1.0: must be in (0, 1)"),
    ("StatsSpec", "stats", {"confidence_level": 0.0}, "confidence_level = 0.0: must be in (0, 1)"),
    ("ExecutionSpec", "execution", {"capture_examples_per_shard": 0}, "capture_examples_per_shard = 0: must be >= 1"),
    ("TrainSpec", "model.train", {"preset": "modular_addition", "steps": 0}, "steps = 0: must be >= 1"),
    ("TrainSpec", "model.train", {"preset": "modular_addition", "seed": -3}, "seed = -3: must be in [0, 4294967296)"),
    ("ProbeSpec", "probe", {"kind": "logistic", "Cs": 0}, "Cs = 0: must be >= 1 (values of the C grid)"),
    ("ProbeSpec", "probe", {"kind": "ridge", "alphas": 0}, "alphas = 0: must be >= 1"),
    ("ProbeSpec", "probe", {"kind": "logistic", "cv": 1}, "cv = 1: must be >= 2 (cross-validation folds)"),
    ("CorrectnessSpec", "correctness", {"cv": 0}, "cv = 0: must be >= 2"),
    ("PatchingSpec", "patching", {"layers": [0, 0]}, "layers = [0, 0]: must be distinct (each value once)"),
    ("PatchingSpec", "patching", {"layers": [-1]}, "layers = [-1]: must be all >= 0 (block indices)"),
    ("PatchingSpec", "patching", {"edge_ks": [10, 10]}, "edge_ks = [10, 10]: must be distinct"),
    ("PatchingSpec", "patching", {"edge_ks": []}, "edge_ks = []: must be non-empty"),
    ("PatchingSpec", "patching", {"edge_top": 0}, "edge_top = 0: must be >= 1"),
    ("LayerSimilaritySpec", "similarity", {"checkpoints": ["a", "a"]}, "checkpoints = ['a', 'a']: must be distinct"),
    ("LayerSimilaritySpec", "similarity", {"batch_size": 0}, "batch_size = 0: must be >= 1"),
    ("FactorizationSpec", "factorization", {"concept_a": "a", "concept_b": "b", "rtol": 0.0}, "rtol = 0.0: must be in (0, 1)"),
    ("HomomorphismSpec", "homomorphism", {"kinds": ["modifier", "modifier"]}, "kinds = ['modifier', 'modifier']: must be distinct"),
    ("NeuronsSpec", "neurons", {"kinds": ["mlp_pre", "mlp_pre"]}, "kinds = ['mlp_pre', 'mlp_pre']: must be distinct"),
])
def test_a_bad_value_is_refused_at_its_key(cls, section, table, message, tmp_path):
    spec = {c.__name__: c for c in _classes()}[cls]
    key = next(k for k in table if k not in ("label", "kind", "preset", "concept_a", "concept_b")
               or len(table) == 1)
    text = f"[{section}]\n" + "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in table.items())
    line = 2 + list(table).index(key)
    with pytest.raises(SuiteError) as err:
        build_table(spec, table, Path(tmp_path / "s.toml"), text, section)
    assert str(err.value).startswith(f"{tmp_path / 's.toml'}:{line}: [{section}] {message}"), err.value
    assert dataclasses.is_dataclass(spec)
