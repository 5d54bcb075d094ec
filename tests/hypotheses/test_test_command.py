"""``probekit test --executor``: the claims run through the named executor; bad names exit 2."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probekit.cli import main
from probekit.executor import InProcessExecutor
from probekit.hypotheses import Measurement, register_measurement

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class _ConstSpec:
    value: float


@register_measurement("const_cli_test", spec=_ConstSpec)
def _const(spec, ctx):
    return Measurement(metric="v", values=np.array([spec.value, spec.value + 1e-9]))


class _Recording(InProcessExecutor):
    calls: list = []

    def map(self, fn, items, *, desc=None):
        type(self).calls.append((fn.__name__, len(items)))
        return super().map(fn, items, desc=desc)


def _file(tmp_path):
    path = tmp_path / "h.toml"
    path.write_text(f'[model]\ncheckpoint = "{ROOT}/probes/checkpoints/modadd-p53"\n'
                    '[data]\nlabel = "answer"\ntask = "modular_addition"\n'
                    'task_options = {p = 53, train_fraction = 0.6}\nmax_per_split = 20\n'
                    '[[claim]]\nmeasure = "const_cli_test"\nvalue = 2.0\ncompare = ">="\n'
                    'threshold = 1\n[[claim]]\nmeasure = "const_cli_test"\nvalue = 0.5\n'
                    'compare = ">="\nthreshold = 1\n')
    return path


def test_executor_option_runs_the_claims_through_it(tmp_path, capsys, monkeypatch):
    import probekit.executor

    # registered for this test only (the executor list is global state other tests read)
    with probekit.executor.EXECUTORS.temporary():
        probekit.executor.register_executor("recording_for_test", lambda **kw: _Recording(progress=False))
        _Recording.calls.clear()
        code = main(["test", str(_file(tmp_path)), "--quiet", "--executor", "recording_for_test"])
    assert code == 1  # the second claim (0.5 >= 1) fails
    assert ("measure_claim", 2) in _Recording.calls
    out = capsys.readouterr().out
    assert out.count("PASS") == 1 and out.count("FAIL") == 1


def test_executor_errors_are_one_line_exit_2(tmp_path, capsys):
    path = str(_file(tmp_path))
    assert main(["test", path, "--check", "--executor", "rya"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rya'" in err[0] and "'inprocess'" in err[0]
    assert main(["test", path, "--check", "--executor", "inprocess", "--ray-address", "auto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use --executor ray" in err[0]
    assert main(["test", path, "--check", "--executor", "inprocess"]) == 0
