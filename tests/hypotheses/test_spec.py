"""Hypothesis files: validation messages (FILE:LINE), the kind registry, light imports, CLI exit 2."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from probekit.cli import main
from probekit.hypotheses import Measurement, load_hypotheses, register_measurement, registered_kinds
from probekit.suites.spec import SuiteError

ROOT = Path(__file__).resolve().parents[2]
HEAD = f"""
[model]
checkpoint = "{ROOT}/probes/checkpoints/modadd-p53"

[data]
label = "answer"
"""


def _write(tmp_path, body):
    path = tmp_path / "h.toml"
    path.write_text(HEAD + body)
    return path


def test_builtin_kinds_are_registered():
    kinds = registered_kinds()
    assert {"probe_accuracy", "patching_effect", "fourier_key_share"} <= set(kinds)
    assert kinds["probe_accuracy"].control and not kinds["fourier_key_share"].control


def test_a_valid_file_loads(tmp_path):
    f = load_hypotheses(_write(tmp_path, """
[[claim]]
measure = "fourier_key_share"
p = 53
compare = "between"
threshold = [0.5, 1.0]
"""))
    (c,) = f.claims
    assert c.threshold == (0.5, 1.0) and c.spec.p == 53 and c.spec.k == 5
    assert c.name == "fourier_key_share in [0.5, 1]"
    assert f.suite.model.checkpoint.endswith("modadd-p53")


@pytest.mark.parametrize("body,match", [
    ('[[claim]]\nmeasure = "fourier_share"\ncompare = ">="\nthreshold = 1', r"h\.toml:8: \[claim\] measure = 'fourier_share': unknown measurement kind \(did you mean 'fourier_key_share'\?\); registered kinds are \[.*'patching_effect'"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\nkk = 3\ncompare = ">="\nthreshold = 1', r"h\.toml:10: \[claim\] kk: unknown key \(did you mean 'k'\?\) for measure 'fourier_key_share'"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = "53"\ncompare = ">="\nthreshold = 1', r"h\.toml:9: \[claim\] p = '53': expected an integer"),
    ('[[claim]]\nmeasure = "fourier_key_share"\ncompare = ">="\nthreshold = 1', r"h\.toml:7: \[claim\]: missing required key\(s\) \['p'\]"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\ncompare = ">"\nthreshold = 1', r"h\.toml:10: \[claim\] compare = '>': must be one of \['>=', '<=', 'between', 'greater_than_control'\]"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\ncompare = "between"\nthreshold = 1', r"h\.toml:11: \[claim\] threshold = 1: 'between' needs \[low, high\]"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\ncompare = "greater_than_control"', r"measure 'fourier_key_share' supplies no control; .*'patching_effect', 'probe_accuracy'"),
    ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\nsource = "unembed"\ncompare = ">="\nthreshold = 1', r"h\.toml:10: \[claim\] source = 'unembed': must be one of \['logits', 'embedding'\]"),
    ('[claims]\nx = 1', r"h\.toml:7: \[claims\]: unknown section \(did you mean 'claim'\?\)"),
    ('', r"no \[\[claim\]\]"),
])
def test_spec_errors_name_file_line_and_choices(tmp_path, body, match):
    with pytest.raises(SuiteError, match=match):
        load_hypotheses(_write(tmp_path, body))


def test_second_claim_error_names_its_own_line(tmp_path):
    body = ('[[claim]]\nmeasure = "fourier_key_share"\np = 53\ncompare = ">="\nthreshold = 0.5\n\n'
            '[[claim]]\nmeasure = "fourier_key_share"\np = 53\nk = "x"\ncompare = ">="\nthreshold = 0.5\n')
    with pytest.raises(SuiteError, match=r"h\.toml:16: \[claim\] k = 'x'"):
        load_hypotheses(_write(tmp_path, body))


def test_a_kind_is_one_registered_function(tmp_path):
    @dataclass(frozen=True, kw_only=True)
    class ConstSpec:
        value: float

    @register_measurement("const_for_test", spec=ConstSpec)
    def const(spec, ctx):
        return Measurement(metric="v", values=[spec.value, spec.value + 1e-9])

    f = load_hypotheses(_write(tmp_path, '[[claim]]\nmeasure = "const_for_test"\nvalue = 2.0\n'
                                         'compare = ">="\nthreshold = 1\n'))
    assert f.claims[0].spec == ConstSpec(value=2.0)


def test_cli_spec_error_is_one_line_exit_2(tmp_path, capsys):
    path = _write(tmp_path, '[[claim]]\nmeasure = "nope"\ncompare = ">="\nthreshold = 1\n')
    assert main(["test", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "probekit test: error:" in err and "registered kinds are" in err
    assert main(["test", "--check", str(ROOT / "circuits" / "modadd_fourier.toml")]) == 0


def test_loading_a_hypothesis_file_imports_no_torch():
    code = ("import sys; from probekit.hypotheses import load_hypotheses; import probekit.cli; "
            f"load_hypotheses({str(ROOT / 'circuits' / 'modadd_fourier.toml')!r}); "
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_run_is_the_function_even_after_its_module_is_imported():
    import probekit.hypotheses as h
    import probekit.hypotheses.runner  # noqa: F401

    assert callable(h.run) and h.run.__module__ == "probekit.hypotheses.runner"
