"""``__post_init__`` checks name their key (``KeyedValueError``); ``build_table`` places them by it.

The file surfaces report a config's own check at the offending key's line from the error's
``key``, never by reading ``KEY = `` out of its message: a keyed message without ``=`` is placed,
an unkeyed one mentioning ``KEY = `` is not.
"""

from __future__ import annotations

import ast
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

from probekit.errors import ConfigError, KeyedValueError
from probekit.suites.spec import DataSpec, StatsSpec, SuiteError, build_table
from probekit.util.constraints import ConstraintError

TEXT = "[demo]\na = 1\nb = 2\n"


@dataclass(frozen=True, kw_only=True)
class _Demo:
    a: int = 0
    b: int = 0

    def __post_init__(self) -> None:
        if self.b == 2 and self.a == 1:
            raise KeyedValueError("b", "b must differ from 2 while a is 1")  # no "KEY = " in it


@dataclass(frozen=True, kw_only=True)
class _Unkeyed:
    a: int = 0
    b: int = 0

    def __post_init__(self) -> None:
        raise ValueError(f"b = {self.b} and a = {self.a} clash")  # a check across keys


def test_the_key_not_the_message_places_the_error(tmp_path):
    path = tmp_path / "x.toml"
    with pytest.raises(SuiteError) as keyed:
        build_table(_Demo, {"a": 1, "b": 2}, path, TEXT, "demo")
    assert str(keyed.value) == f"{path}:3: [demo] b: b must differ from 2 while a is 1"
    with pytest.raises(SuiteError) as unkeyed:
        build_table(_Unkeyed, {"a": 1, "b": 2}, path, TEXT, "demo")
    assert str(unkeyed.value) == f"{path}:1: [demo]: b = 2 and a = 1 clash"


def test_a_shipped_check_keeps_its_message_at_its_line(tmp_path):
    text = "[data]\nlabel = \"y\"\nood_splits = [\"train\"]\n"
    with pytest.raises(SuiteError) as err:
        build_table(DataSpec, {"label": "y", "ood_splits": ["train"]}, tmp_path / "s.toml", text,
                    "data")
    assert str(err.value).startswith(f"{tmp_path / 's.toml'}:3: [data] ood_splits: ood_splits = "
                                      "['train']: 'train' is also the train_split")
    text = "[stats]\nseed = 1\nn_bootstrap = 500\n"  # a declared rule: at its line, with its hint
    with pytest.raises(SuiteError) as err:
        build_table(StatsSpec, {"seed": 1, "n_bootstrap": 500}, tmp_path / "s.toml", text, "stats")
    assert str(err.value) == (f"{tmp_path / 's.toml'}:3: [stats] n_bootstrap = 500: must be >= "
                              "1000 (percentile intervals need >= 1000 resamples)")
    with pytest.raises(KeyedValueError) as direct:  # the Python API: the same message, its key
        StatsSpec(n_bootstrap=500)
    assert direct.value.key == "n_bootstrap" and isinstance(direct.value, (ConfigError, ValueError))


def test_keyed_errors_pickle_whole():
    for err in (KeyedValueError("window", "window = 0: must be >= 1"),
                ConstraintError("TrainConfig", "lr", -1.0, "> 0")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and back.key == err.key and str(back) == str(err)
    assert pickle.loads(pickle.dumps(ConstraintError("C", "k", 3, ">= 5"))).rule == ">= 5"


def test_every_post_init_check_of_one_key_is_keyed():
    """A ``__post_init__`` raise whose message opens with ``KEY = `` raises ``KeyedValueError``."""
    root = Path(__file__).resolve().parents[2] / "probekit"
    bad = []
    for file in sorted(root.rglob("*.py")):
        tree = ast.parse(file.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and n.name == "__post_init__"):
            for r in (n for n in ast.walk(fn) if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)):
                first = next((a for a in r.exc.args if isinstance(a, ast.JoinedStr)), None)
                head = first.values[0] if first is not None and first.values else None
                opens = (isinstance(head, ast.Constant) and isinstance(head.value, str)
                         and head.value.split(" = ")[0].isidentifier() and " = " in head.value)
                name = getattr(r.exc.func, "id", "")
                if opens and name != "KeyedValueError":
                    bad.append(f"{file.relative_to(root)}:{r.lineno}")
    assert bad == []
