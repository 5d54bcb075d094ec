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
