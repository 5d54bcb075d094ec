"""Calling a measurement kind: a plug-in's failure is one line blaming the plug-in.

Toy kinds defined in this test module are plug-ins (their module is not probekit's); each
failure mode of issue 59 pattern 3 / issue 56 item 5 is checked on its own case: an exception,
``sys.exit`` inside the kind, a float returned where a ``Measurement`` is expected, a NaN value
(the message names the marker and the model), and a built-in kind's errors unchanged.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from probekit.cli import main
from probekit.diagnosis.markers import measure_marker
from probekit.diagnosis.spec import MarkerSpec
from probekit.errors import NonFiniteError, NotApplicableError, PluginError
from probekit.executor import _WORKER_IMPORTS
from probekit.hypotheses.calls import call_kind, kind_plugin
from probekit.hypotheses.measurement import Measurement
from probekit.hypotheses.registry import MEASUREMENT_KINDS, MeasurementKind, get_kind
from tests.hypotheses.helpers import FakeContext

ROOT = Path(__file__).resolve().parents[2]
HERE = __name__


@dataclass(frozen=True, kw_only=True)
class ToySpec:
    what: str = "ok"


def toy(spec: ToySpec, ctx: object) -> object:
    """A kind failing in the way ``spec.what`` names."""
    if spec.what == "raise":
        return 1 / 0
    if spec.what == "exit":
        sys.exit(0)
    if spec.what == "float":
        return 0.5
    if spec.what == "nan":
        return Measurement(metric="m", values=np.array([1.0, float("nan"), 2.0]))
    if spec.what == "na":
        from probekit.errors import NotApplicableError

        raise NotApplicableError("no Fourier keys here")
    return Measurement(metric="m", values=np.array([1.0, 2.0, 3.0]))


KIND = MeasurementKind(name="toy", spec=ToySpec, measure=toy)


def _call(what: str) -> Measurement:
    return call_kind(KIND, ToySpec(what=what), None, subject="marker 'm' on model 'gpt-a'")


def test_the_kind_of_a_test_module_is_a_plugin_and_a_shipped_one_is_not():
    assert kind_plugin(KIND) == HERE
    assert kind_plugin(get_kind("weight_norm")) is None


@pytest.mark.parametrize(("what", "tail"), [
    ("raise", "ZeroDivisionError: division by zero (an error of the plug-in's code: fix "
              f"'{HERE}' or remove its marker)"),
    ("exit", "SystemExit: the plug-in called sys.exit(0) (a plug-in must not exit) (an error of "
             f"the plug-in's code: fix '{HERE}' or remove its marker)"),
    ("float", "returned float 0.5; a measurement kind returns a probekit.hypotheses.Measurement "
              "(values= per-unit numbers, or estimate= with resamples=)"),
])
def test_a_failing_plugin_kind_is_one_line_blaming_the_plugin(what, tail):
    with pytest.raises(PluginError) as info:
        _call(what)
    assert str(info.value) == f"marker 'm' on model 'gpt-a' (kind 'toy' from plug-in '{HERE}'): {tail}"


def test_a_nan_value_names_the_marker_and_the_model():
    with pytest.raises(NonFiniteError) as info:
        _call("nan")
    assert str(info.value) == (f"marker 'm' on model 'gpt-a' (kind 'toy' from plug-in '{HERE}'): "
                               "measurement values[1] is nan; a measurement kind must return "
                               "finite numbers (drop undefined examples before returning)")


def test_not_applicable_and_a_good_result_pass_through():
    with pytest.raises(NotApplicableError, match="^no Fourier keys here$"):
        _call("na")
    assert _call("ok").estimate == 2.0


def test_a_builtin_kinds_bug_keeps_its_traceback():
    """Only a plug-in is blamed: an ordinary exception of a shipped kind stays a bug."""
    def broken(spec, ctx):
        raise KeyError("x")

    broken.__module__ = "probekit.hypotheses.kinds.fake"
    with pytest.raises(KeyError):
        call_kind(MeasurementKind(name="b", spec=ToySpec, measure=broken), ToySpec(), None,
                  subject="claim 'c'")


def test_measure_marker_names_marker_and_model():
    """The diagnosis path: ``measure_marker(..., model=)`` on a stand-in context."""
    ctx = FakeContext()
    with MEASUREMENT_KINDS.temporary():
        MEASUREMENT_KINDS.register("toy", KIND, origin=toy)
        with pytest.raises(PluginError, match=r"^marker 'probe' on model 'llama-b' \(kind 'toy' "
                           rf"from plug-in '{HERE}'\): returned float 0.5; "):
            measure_marker(MarkerSpec(name="probe", measure="toy", spec=ToySpec(what="float")),
                           ctx, model="llama-b")
        cell = measure_marker(MarkerSpec(name="probe", measure="toy", spec=ToySpec()), ctx,
                              model="llama-b")
    assert cell.value == 2.0 and cell.low <= 2.0 <= cell.high


RAISING = '''
from dataclasses import dataclass
from probekit.hypotheses import register_measurement

@dataclass(frozen=True, kw_only=True)
class S:
    pass

@register_measurement("{name}", spec=S)
def kind(spec, ctx):
    return {{"accuracy": 1.0 / 0}}
'''


def test_a_claim_whose_plugin_kind_raises_is_one_line_exit_2(tmp_path, capsys):
    """``probekit test``: exit 2 and one line naming claim, kind and module, no bug report."""
    module, name = "mod_raising_kind", "raising_kind"
    (tmp_path / f"{module}.py").write_text(RAISING.format(name=name))
    path = tmp_path / "claims.toml"
    path.write_text(textwrap.dedent(f'''\
        [plugins]
        modules = ["{module}"]
        [model]
        checkpoint = "{ROOT}/probes/checkpoints/modadd-p53"
        [data]
        label = "answer"
        task = "modular_addition"
        task_options = {{p = 53, train_fraction = 0.6}}
        max_per_split = 20
        [[claim]]
        name = "accuracy is high"
        measure = "{name}"
        compare = ">="
        threshold = 1.0
        '''))
    saved_imports, saved_path = dict(_WORKER_IMPORTS), list(sys.path)
    try:
        with MEASUREMENT_KINDS.temporary():
            status = main(["test", str(path), "--executor", "inprocess"])
    finally:
        sys.modules.pop(module, None)
        sys.path[:] = saved_path
        _WORKER_IMPORTS.clear()
        _WORKER_IMPORTS.update(saved_imports)
    err = capsys.readouterr().err
    assert status == 2 and "bug in probekit" not in err and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"probekit test: error: claim 'accuracy is high' (kind '{name}' from plug-in '{module}'): "
        f"ZeroDivisionError: float division by zero (an error of the plug-in's code: fix "
        f"'{module}' or remove its claim)")
