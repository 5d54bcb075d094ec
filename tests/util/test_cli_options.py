"""Flags generated from a config dataclass (:mod:`probekit.util.cli_options`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest

from probekit.errors import ConfigError
from probekit.util.cli_options import (
    ListFlag,
    add_config_flags,
    config_from_flags,
    field_docs,
    flag_fields,
    flag_name,
)
from probekit.util.constraints import Distinct, Each, Ge, Validated


@dataclass(frozen=True, kw_only=True)
class Base(Validated):
    """A base.

    Attributes:
        size: rows per pass (100% of them
            by default).
    """

    size: Annotated[int, Ge(1)] = 64


@dataclass(frozen=True, kw_only=True)
class Opts(Base):
    """Options.

    Attributes:
        side, mode: where and how.
        layers: blocks to patch.
        quiet: no output.
        loud: more output.
        scale: a factor or None.
    """

    side: Literal["left", "right"] = "right"
    mode: str = "a"
    layers: Annotated[tuple[int, ...], Each(Ge(0)), Distinct()] = ()
    quiet: bool = False
    loud: bool = True
    scale: float | None = None


FIELDS = ("size", "side", "mode", "layers", "quiet", "loud", "scale")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    add_config_flags(parser, Opts, FIELDS)
    return parser


def test_docs_are_read_along_the_class_hierarchy():
    docs = field_docs(Opts)
    assert docs["size"] == "rows per pass (100% of them by default)."
    assert docs["side"] == docs["mode"] == "where and how."
    assert flag_name("edge_ks") == "--edge-ks"


def test_each_field_is_one_flag_with_its_default_choices_and_rule():
    parser = _parser()
    actions = {a.dest: a for a in parser._actions}
    assert actions["size"].default == 64 and actions["size"].type is int
    assert "must be >= 1; default 64" in actions["size"].help
    assert "100%" in actions["size"].help % {}  # a literal % survives argparse's formatting
    assert actions["side"].choices == ["left", "right"]
    assert actions["quiet"].option_strings == ["--quiet"] and actions["quiet"].default is False
    assert actions["loud"].option_strings == ["--loud", "--no-loud"]
    assert flag_fields(parser)["layers"] == (Opts, "layers")
    assert config_from_flags(parser.parse_args([]), Opts, FIELDS) == Opts()
    got = config_from_flags(parser.parse_args(["--size", "8", "--side", "left", "--layers", "2, 0",
                                               "--quiet", "--no-loud", "--scale", "0.5"]),
                            Opts, FIELDS)
    assert got == Opts(size=8, side="left", layers=(2, 0), quiet=True, loud=False, scale=0.5)


@pytest.mark.parametrize(("argv", "message"), [
    (["--size", "0"], "--size 0: must be >= 1"),
    (["--layers", "0,x"], "--layers '0,x': expected comma-separated blocks like 0,1"),
    (["--layers", "1,1"], "--layers [1, 1]: block 1 is given twice; give each block once"),
    (["--layers", "-1"], "--layers [-1]: block -1 is outside 0..inf"),
])
def test_a_bad_value_names_the_flag(argv, message):
    args = _parser().parse_args(argv)
    with pytest.raises(ConfigError) as err:
        config_from_flags(args, Opts, FIELDS, lists={"layers": ListFlag("block", "blocks like 0,1")})
    assert str(err.value).startswith(message)


def test_a_required_field_cannot_be_a_flag():
    @dataclass(frozen=True, kw_only=True)
    class Needs(Validated):
        name: str

    with pytest.raises(ConfigError, match="Needs.name has no default"):
        add_config_flags(argparse.ArgumentParser(), Needs, ("name",))
