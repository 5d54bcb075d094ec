"""probekit.util.constraints: the declarative field rules and the one validator reading them."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest

from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError, build_table
from probekit.util.constraints import (
    Between,
    ConstraintError,
    Each,
    Finite,
    Ge,
    Gt,
    Le,
    Lt,
    NonEmpty,
    Validated,
    base_config,
    keys_of,
)


@dataclass(frozen=True, kw_only=True)
class Toy(Validated):
    n: Annotated[int, Ge(1)] = 1
    rate: Annotated[float, Between(0, 1)] = 0.5
    share: Annotated[float, Between(0, 1, closed="right")] = 1.0
    scale: Annotated[float, Gt(0), Finite()] = 1.0
    cap: Annotated[int | None, Le(10)] = None
    low: Annotated[float, Lt(0)] = -1.0
    mode: Literal["a", "b"] = "a"
    modes: Annotated[tuple[Literal["x", "y"], ...], NonEmpty()] = ("x",)
    shares: Annotated[tuple[float, ...], Each(Between(0, 1, closed="right"))] = (0.5,)
    many: Annotated[int, Ge(5, hint="19 for p < 0.05")] = 5


@dataclass(frozen=True, kw_only=True)
class ToySurface(Toy):
    extra: str = "e"
    n: Annotated[int, Ge(1)] = field(default=3, init=False)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n": 0}, "Toy.n must be >= 1, got 0"),
    ({"rate": 1.0}, "Toy.rate must be in (0, 1), got 1.0"),
    ({"rate": math.nan}, "Toy.rate must be in (0, 1), got nan"),
    ({"share": 0.0}, "Toy.share must be in (0, 1], got 0.0"),
    ({"scale": math.inf}, "Toy.scale must be a finite number, got inf"),
    ({"scale": 0.0}, "Toy.scale must be > 0, got 0.0"),
    ({"cap": 11}, "Toy.cap must be <= 10, got 11"),
    ({"low": 0.0}, "Toy.low must be < 0, got 0.0"),
    ({"mode": "c"}, "Toy.mode must be one of ['a', 'b'], got 'c'"),
    ({"modes": ("x", "z")}, "Toy.modes must be drawn from ['x', 'y'], got ('x', 'z')"),
    ({"modes": ()}, "Toy.modes must be non-empty, got ()"),
    ({"shares": (0.5, 1.5)}, "Toy.shares must be all in (0, 1], got (0.5, 1.5)"),
    ({"many": 2}, "Toy.many must be >= 5 (19 for p < 0.05), got 2"),
])
def test_each_rule_names_the_class_field_rule_and_value(kwargs, message):
    with pytest.raises(ConstraintError) as info:
        Toy(**kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ConfigError)
    assert info.value.key == next(iter(kwargs))


def test_valid_values_and_none_pass():
    toy = Toy(n=2, rate=0.1, share=1.0, cap=None, modes=("y", "x"), shares=(1.0, 0.1))
    assert toy.n == 2 and toy.cap is None


def test_init_false_fields_are_not_keys_and_base_config_rebuilds_the_base():
    assert "n" not in keys_of(ToySurface) and "extra" in keys_of(ToySurface)
    surface = ToySurface(rate=0.25, extra="z")
    base = base_config(surface, Toy, mode="b")
    assert type(base) is Toy
    assert base == Toy(n=3, rate=0.25, mode="b")


def test_suite_tables_report_the_rule_at_the_key_line(tmp_path):
    text = '[toy]\nrate = 0.5\nn = 0\n'
    path = tmp_path / "t.toml"
    with pytest.raises(SuiteError, match=r"^.*t\.toml:3: \[toy\] n = 0: must be >= 1$"):
        build_table(Toy, {"rate": 0.5, "n": 0}, path, text, "toy")
    with pytest.raises(SuiteError, match=r"t\.toml:\d+: \[toy\] n: unknown key"):
        build_table(ToySurface, {"n": 2}, path, text, "toy")
    built = build_table(ToySurface, {"extra": "q", "modes": ["y"]}, path, text, "toy")
    assert built.modes == ("y",) and built.n == 3
    assert dataclasses.asdict(built)["extra"] == "q"


# ------------------------------------------------ typed configs: one rule for every surface


@pytest.mark.parametrize(
    ("value", "annotation", "ok"),
    [(3, int, True), (3.0, int, False), (True, int, False), (3, float, True), (None, int | None, True),
     ((0.9, 0.98), tuple[float, float], True), ((0.9,), tuple[float, float], False),
     ((1, 2), tuple[int, ...], True), ([1, 2], tuple[int, ...], False), ("a", Literal["a", "b"], True),
     ("c", Literal["a", "b"], False)],
)
def test_conforms(value, annotation, ok):
    from probekit.util.constraints import conforms

    assert conforms(value, annotation) is ok


def test_int_bounds_are_shown_in_full():
    from probekit.util.constraints import SEED, Le

    assert Le(100_000).text == "<= 100000"
    assert SEED.text == "in [0, 4294967296)"


@pytest.mark.parametrize(
    ("preset", "item", "cls", "kwargs"),
    [("modular_addition", "task.p=23.0", "task", {"p": 23.0}),
     ("modular_addition", "task.train_fraction=1.5", "task", {"train_fraction": 1.5}),
     ("modular_addition", "train.lr=1e400", "train", {"lr": math.inf}),
     ("modular_addition", "train.batch_size=0", "train", {"batch_size": 0}),
     ("modular_addition", "model.n_layers=0", "model", {"n_layers": 0}),
     ("modular_addition", "model.act_fn=tanh", "model", {"act_fn": "tanh"}),
     ("scan", "task.alignment=left", "task", {"alignment": "left"})],
)
def test_set_and_the_python_api_give_the_same_line(preset, item, cls, kwargs):
    """``probekit train --set`` (and a diagnosis grid, which goes through it) says exactly what the
    config says when built in Python, prefixed with the ``--set`` item."""
    from probekit.models import ModelConfig
    from probekit.testbeds.registry import config_class
    from probekit.train import TrainConfig
    from probekit.train.build import build_run
    from probekit.train.presets import get_preset
    from probekit.util.constraints import check_value

    with pytest.raises(ConfigError) as via_set:
        build_run(preset, sets=[item])
    owner = {"task": config_class(get_preset(preset).task), "train": TrainConfig,
             "model": ModelConfig}[cls]
    (key, value), = kwargs.items()
    with pytest.raises(ConstraintError) as via_api:  # what validate() raises in __post_init__
        check_value(owner, key, value)
    assert str(via_set.value) == f"--set {item}: {via_api.value}"


def test_configs_validate_in_python_without_a_type_checker():
    """The declared rules run in ``__post_init__`` (the type check too: without pytest's
    jaxtyping hook nothing else would refuse ``p=23.0``)."""
    from probekit.testbeds.modular import ModularAdditionConfig
    from probekit.util.constraints import validate

    cfg = ModularAdditionConfig(p=23)
    object.__setattr__(cfg, "p", 23.0)  # as an unchecked constructor would have stored it
    with pytest.raises(ConstraintError, match=r"^ModularAdditionConfig\.p must be an int, got 23\.0$"):
        validate(cfg)
