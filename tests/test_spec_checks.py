"""One declaration per option, checked over every config and every command (issue 58, item 2).

Like scikit-learn's ``check_estimator``: the checks of :mod:`probekit.util.spec_checks` run
over every dataclass of probekit (discovered by parsing the package's source, not listed, and
without importing it: the walk takes about a second) and every parser of ``probekit``, and fail
on an option declared twice (a subclass field redeclared over its base's, a flag that differs
from its field or copies it by hand), a hand-written ``__post_init__`` bound that a declared
constraint expresses, and two config classes of one name. The planted cases below show that
each check can fail.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path

import pytest

from probekit.util.cli_options import add_config_flags, config_from_flags
from probekit.util.constraints import Ge, Validated, constraints_of
from probekit.util.spec_checks import (
    dataclasses_of,
    flag_mismatches,
    hand_written_bounds,
    parse_modules,
    read_modules,
    redeclared_options,
    same_names,
)

PACKAGE = Path(__file__).resolve().parents[1] / "probekit"

#: hand-written bounds kept on purpose, by (class, field), with the reason
KEPT = {
    ("Site", "kind"): "a value type, not a config: its message suggests the closest kinds",
    ("ProgressSettings", "log_interval"): "progress may not import util (sibling layers)",
    ("ProgressSettings", "delay"): "progress may not import util (sibling layers)",
}
#: hand-written bounds of probekit/diagnosis, converted by the diagnosis split (issue 58 item 1)
DIAGNOSIS = {
    ("DegenerateRule", "min_range"), ("DegenerateRule", "max_tied_share"),
    ("PlannedDesign", "n_markers"), ("PlannedDesign", "alpha"), ("PlannedDesign", "measured_r2"),
    ("PlannedDesign", "inference"), ("PopulationSpec", "target_mde"),
    ("DiagnosisSettings", "n_permutations"), ("DiagnosisSettings", "n_bootstrap"),
    ("DiagnosisSettings", "alpha"), ("DiagnosisSettings", "crossing"),
    ("DiagnosisSettings", "max_eval_examples"), ("DiagnosisSettings", "max_permutations"),
    ("DiagnosisSettings", "calibration_simulations"), ("DiagnosisSettings", "mde_simulations"),
}
#: config classes are named for what they configure
CONFIG_SUFFIXES = ("Spec", "Config", "Options", "Settings")


@pytest.fixture(scope="module")
def modules():
    return read_modules(PACKAGE)


def _key(finding: str) -> tuple[str, str]:
    cls = finding.split(": ", 1)[1].split(".__post_init__", 1)[0]
    return cls, finding.split("'")[1]


def test_the_walk_finds_the_configs_of_every_layer(modules):
    names = {cls.name for _, cls in dataclasses_of(modules)}
    assert {"CaptureConfig", "CaptureSpec", "CaptureOptions", "PatchingSpec", "PatchOptions",
            "DeactivationConfig", "NeuronDeactivationSpec", "TrainConfig", "HEConfig",
            "SweepConfig", "ProcessExecutor", "DiagnosisSettings"} <= names
    assert len([n for n in names if n.endswith(CONFIG_SUFFIXES)]) >= 60


def test_no_hand_written_bound_that_a_constraint_expresses(modules):
    findings = hand_written_bounds(modules)
    left = [f for f in findings if _key(f) not in KEPT and _key(f) not in DIAGNOSIS]
    assert not left, "\n".join(left)
    assert {_key(f) for f in findings} >= set(KEPT)  # each exemption is still needed


def test_no_option_redeclared_over_its_base(modules):
    found = redeclared_options(modules, CONFIG_SUFFIXES)
    assert not found, "\n".join(found)


def test_every_flag_agrees_with_its_config_field():
    from probekit.cli import build_parser

    parser = build_parser()
    assert not flag_mismatches(parser), "\n".join(flag_mismatches(parser))


def test_no_two_config_classes_share_a_name(modules):
    found = same_names(modules, CONFIG_SUFFIXES)
    assert not found, "\n".join(found)


# --- the review list of issue 58: each option below has one declaration --------------------------

def _default(cls: type, name: str):
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field.default if field.default is not dataclasses.MISSING else field.default_factory()


def _sub(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def test_capture_batch_and_shard_size_have_one_default_everywhere(modules):
    from probekit.capture_options import CaptureOptions, ShardOptions
    from probekit.cli import build_parser
    from probekit.suites.spec import CaptureSpec, ExecutionSpec

    capture = _sub(build_parser(), "capture")
    flags = {a.dest: a.default for a in capture._actions}
    for name in ("batch_size", "padding_side", "dtype"):
        assert _default(CaptureOptions, name) == flags[name], name
    assert _default(ShardOptions, "examples_per_shard") == flags["examples_per_shard"]
    # the Python API's CaptureConfig inherits them all (read from its source: no torch import)
    config = next(c for m, c in dataclasses_of(modules) if c.name == "CaptureConfig")
    assert [b.id for b in config.bases] == ["CaptureOptions", "ShardOptions"]
    own = {n.target.id for n in config.body if hasattr(n, "target")}
    assert not own & {"batch_size", "padding_side", "dtype", "examples_per_shard"}
    assert (_default(CaptureSpec, "batch_size"), flags["batch_size"]) == (64, 64)  # the suites' value
    assert _default(ExecutionSpec, "capture_examples_per_shard") == flags["examples_per_shard"] == 256
    assert (constraints_of(ExecutionSpec)["capture_examples_per_shard"]
            == constraints_of(ShardOptions)["examples_per_shard"])
    # the suite's [capture] keys are unchanged (its marker cache keys hash them)
    assert sorted(f.name for f in dataclasses.fields(CaptureSpec)) == [
        "batch_size", "dtype", "include_embed", "kind", "padding_side", "positions", "sites"]


def test_patch_flags_are_the_patching_spec_fields():
    from probekit.cli import build_parser
    from probekit.suites.analyses.patching import PatchingSpec
    from probekit.suites.patch_cli import PATCH_FLAGS

    patch = _sub(build_parser(), "patch")
    flags = {a.dest: a for a in patch._actions}
    assert len(PATCH_FLAGS) == 15 and set(PATCH_FLAGS) <= set(flags)
    for name in PATCH_FLAGS:
        assert flags[name].default == _default(PatchingSpec, name), name
    args = patch.parse_args(["m", "d", "--out", "o", "--layers", "1,0", "--window", "2"])
    spec = config_from_flags(args, PatchingSpec, PATCH_FLAGS)
    assert (spec.layers, spec.window, spec.edge_ks) == ((1, 0), 2, (10, 100, 1000))


def test_neuron_deactivation_claim_takes_the_method_rules():
    from probekit.hypotheses.kinds.neuron_deactivation import NeuronDeactivationSpec
    from probekit.neurons.config import DeactivationConfig

    for name in ("k", "n_random"):
        claim, method = constraints_of(NeuronDeactivationSpec)[name], constraints_of(DeactivationConfig)[name]
        assert claim[1] == method[1] and claim[1], name
    assert [r.bound for r in constraints_of(NeuronDeactivationSpec)["n_random"][1]][0] == 5


# --- planted: each check fails on a second declaration or a hand-written bound -------------------

PLANTED = {
    "pkg.base": '''
from dataclasses import dataclass, field
from typing import Annotated
from probekit.errors import ConfigError
from probekit.util.constraints import Ge, Validated

@dataclass(frozen=True, kw_only=True)
class PlantedConfig(Validated):
    batch_size: Annotated[int, Ge(1)] = 64
    side: str = "right"
    n: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.side not in ("left", "right"):
            raise ConfigError("bad side")
        if self.n is not None and self.n < 2:
            raise ConfigError("bad n")
        for key in ("batch_size",):
            value = getattr(self, key)
            if isinstance(value, bool) or value > 4096:
                raise ConfigError("too big")
        if self.batch_size > 1 and self.side == "left":  # across fields: not a constraint's
            raise ConfigError("fine")
''',
    "pkg.surface": '''
from dataclasses import dataclass, field
from typing import Annotated
from .base import PlantedConfig
from probekit.util.constraints import Ge

@dataclass(frozen=True, kw_only=True)
class SurfaceSpec(PlantedConfig):  # the surface sets its seed itself: allowed
    seed: int = field(default=0, init=False)
    extra: str = ""

@dataclass(frozen=True, kw_only=True)
class TwiceSpec(SurfaceSpec):
    batch_size: Annotated[int, Ge(5)] = 32
''',
    "pkg.other": '''
from dataclasses import dataclass

@dataclass(frozen=True)
class SurfaceSpec:
    x: int = 0
''',
}


def test_the_bound_check_finds_planted_hand_written_bounds():
    found = hand_written_bounds(parse_modules({"pkg.base": PLANTED["pkg.base"]}))
    assert [_key(f) for f in found] == [("PlantedConfig", "side"), ("PlantedConfig", "n"),
                                       ("PlantedConfig", "batch_size")]
    assert found[0].startswith("pkg/base.py:16: PlantedConfig.__post_init__ bounds 'side' by hand")


def test_the_redeclaration_check_finds_a_planted_second_declaration():
    assert redeclared_options(parse_modules({k: PLANTED[k] for k in ("pkg.base",)})) == []
    found = redeclared_options(parse_modules(PLANTED))
    assert len(found) == 1, found
    assert found[0].startswith("pkg/surface.py:14: TwiceSpec.batch_size redeclares "
                               "PlantedConfig.batch_size (Annotated[int, Ge(5)] = 32 over "
                               "Annotated[int, Ge(1)] = 64)")


def test_the_name_check_finds_two_classes_of_one_name():
    assert same_names(parse_modules({"pkg.surface": PLANTED["pkg.surface"]}), ("Spec",)) == []
    assert same_names(parse_modules(PLANTED), ("Spec",)) == [
        "SurfaceSpec: pkg.surface.SurfaceSpec, pkg.other.SurfaceSpec"]


def test_the_flag_check_finds_a_changed_default_and_a_hand_written_copy():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Opts(Validated):
        batch_size: typing.Annotated[int, Ge(1)] = 64
        side: typing.Literal["left", "right"] = "right"

    root = argparse.ArgumentParser(prog="tool")
    sub = root.add_subparsers()
    good = sub.add_parser("good")
    add_config_flags(good, Opts, ("batch_size", "side"))
    assert flag_mismatches(root) == []
    args = good.parse_args(["--batch-size", "8", "--side", "left"])
    assert config_from_flags(args, Opts, ("batch_size", "side")) == Opts(batch_size=8, side="left")
    with pytest.raises(ValueError, match=r"^--batch-size 0: must be >= 1$"):
        config_from_flags(good.parse_args(["--batch-size", "0"]), Opts, ("batch_size",))
    bad = sub.add_parser("bad")
    add_config_flags(bad, Opts, ("side",))
    bad.add_argument("--batch-size", type=int, default=32)  # a copy by hand, another default
    for action in bad._actions:
        if action.dest == "side":
            action.default = "left"  # a generated flag edited afterwards
    found = flag_mismatches(root)
    assert len(found) == 2, found
    assert "bad --side: default 'left' but Opts.side = 'right'" in found[0]
    assert "bad --batch-size: a hand-written copy of Opts.batch_size" in found[1]
