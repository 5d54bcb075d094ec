"""Measurement kinds from the user's own code: ``[plugins]`` of a file, entry points, workers.

A plug-in module written to a temporary folder (outside the package, not on ``sys.path``) is
named by a claim file; its kind must run under the in-process, processes and Ray executors
(workers import it before their first task), be listed by ``probekit test --list-kinds``, and a
broken plug-in must be one line naming the module and the problem.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from probekit.cli import main
from probekit.errors import ConfigError
from probekit.executor import _WORKER_IMPORTS, InProcessExecutor
from probekit.hypotheses.registry import MEASUREMENT_KINDS

ROOT = Path(__file__).resolve().parents[2]

# the plug-in: per-example values (b - a) mod 7 of the data's columns, so the estimate is exact
# to check: a task run in a worker returns the same numbers as in the driver
PLUGIN = '''
from dataclasses import dataclass
import os
import numpy as np
from probekit.hypotheses import Measurement, register_measurement

@dataclass(frozen=True, kw_only=True)
class OffsetSpec:
    offset: float = 0.0

@register_measurement("{name}", spec=OffsetSpec)
def offset_kind(spec, ctx):
    """Constant values around ``offset`` (and the pid of the process that measured)."""
    values = np.array([spec.offset - 1.0, spec.offset, spec.offset + 1.0])
    return Measurement(metric="offset", values=values, details={{"pid": os.getpid()}})
'''

# a plug-in whose kind borrows a spec class from probekit: unpickling a claim's spec in a worker
# then never imports the plug-in module, so its kind exists there only if the worker imported
# the module itself (probekit.executor.worker_imports)
PLUGIN_BORROWED_SPEC = '''
import os
import numpy as np
from probekit.hypotheses import Measurement, register_measurement
from probekit.hypotheses.kinds.weight_norm import WeightNormSpec

@register_measurement("{name}", spec=WeightNormSpec)
def borrowed(spec, ctx):
    """Values 1, 2, 3 (and the pid of the process that measured)."""
    return Measurement(metric="v", values=np.array([1.0, 2.0, 3.0]), details={{"pid": os.getpid()}})
'''


def _claims(folder: Path, modules: str, *, measure: str, offset: float = 2.0) -> Path:
    path = folder / "claims.toml"
    path.write_text(textwrap.dedent(f'''\
        [plugins]
        modules = {modules}

        [model]
        checkpoint = "{ROOT}/probes/checkpoints/modadd-p53"

        [data]
        label = "answer"
        task = "modular_addition"
        task_options = {{p = 53, train_fraction = 0.6}}
        max_per_split = 20

        [[claim]]
        measure = "{measure}"
        offset = {offset}
        compare = ">="
        threshold = 1.0
        '''))
    return path


@pytest.fixture
def plugin_dir(tmp_path, request):
    """A folder with one plug-in module (a name unique to the test) and its claim file.

    Everything it changes is undone: the kind, the module in ``sys.modules``, the folder on
    ``sys.path`` and the workers' imports.
    """
    name = f"plugkind_{request.node.name.split('[')[0][5:35]}"
    module = f"mod_{name}"
    (tmp_path / f"{module}.py").write_text(PLUGIN.format(name=name))
    saved_imports, saved_path = dict(_WORKER_IMPORTS), list(sys.path)
    with MEASUREMENT_KINDS.temporary():
        yield tmp_path, module, name
    sys.modules.pop(module, None)
    sys.path[:] = saved_path
    _WORKER_IMPORTS.clear()
    _WORKER_IMPORTS.update(saved_imports)


def _run(path: Path, executor) -> tuple[float, int]:
    from probekit.hypotheses import load_hypotheses, run

    result = run(load_hypotheses(path), executor=executor)
    (claim,) = result.claims
    assert claim.verdict == "PASS"
    return claim.effect, claim.measurement.details["pid"]


def test_plugin_from_the_files_folder_runs_in_process(plugin_dir):
    import os

    folder, module, name = plugin_dir
    assert module not in sys.modules
    effect, pid = _run(_claims(folder, f'["{module}"]', measure=name), InProcessExecutor(progress=False))
    assert effect == pytest.approx(2.0) and pid == os.getpid()
    # declared to the workers with the file's folder, origin recorded for --list-kinds
    assert _WORKER_IMPORTS[module].folder == str(folder.resolve())
    assert MEASUREMENT_KINDS.origin(name) == f"{module}.offset_kind"


def test_plugin_given_as_a_py_path_relative_to_the_file(plugin_dir):
    folder, module, name = plugin_dir
    sub = folder / "lib"
    sub.mkdir()
    (folder / f"{module}.py").rename(sub / f"{module}.py")
    (folder / "claims").mkdir()
    path = _claims(folder / "claims", f'["../lib/{module}.py"]', measure=name, offset=3.0)
    effect, _ = _run(path, InProcessExecutor(progress=False))
    assert effect == pytest.approx(3.0)
    assert _WORKER_IMPORTS[module].folder == str(sub.resolve())


@pytest.mark.slow  # spawns a worker process (it imports torch): ~15 s on 2 cores
def test_plugin_runs_under_the_processes_executor(plugin_dir):
    import os

    from probekit.executors.processes import ProcessExecutor

    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text(PLUGIN_BORROWED_SPEC.format(name=name))
    path = _claims(folder, f'["{module}"]', measure=name)
    path.write_text(path.read_text().replace("offset = 2.0\n", ""))
    effect, pid = _run(path, ProcessExecutor(workers=1, progress=False))
    assert effect == pytest.approx(2.0)
    assert pid != os.getpid()  # measured in a worker, which imported the plug-in itself


@pytest.mark.slow  # starts a local Ray cluster: ~30 s
def test_plugin_runs_under_the_ray_executor(plugin_dir):
    import os

    pytest.importorskip("ray")
    import ray

    from probekit.executors.ray import RayExecutor

    folder, module, name = plugin_dir
    started = not ray.is_initialized()
    try:
        effect, pid = _run(_claims(folder, f'["{module}"]', measure=name),
                           RayExecutor(num_cpus=1, progress=False))
    finally:
        if started:
            ray.shutdown()
    assert effect == pytest.approx(2.0)
    assert pid != os.getpid()


def test_list_kinds_shows_builtin_and_plugin_kinds_with_their_origin(plugin_dir, capsys):
    folder, module, name = plugin_dir
    path = _claims(folder, f'["{module}"]', measure=name)
    assert main(["test", "--list-kinds", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_name = {line.split()[0]: line for line in lines}
    assert "built-in" in by_name["probe_accuracy"]
    assert f"plug-in {module} (from {path}:2)" in by_name[name]
    assert by_name[name].endswith("Constant values around ``offset`` (and the pid of the process that measured).")
    assert lines.index(by_name[name]) > lines.index(by_name["weight_norm"])  # built-ins first


def _one_line_error(path: Path) -> str:
    from probekit.hypotheses import load_hypotheses

    with pytest.raises(ConfigError) as info:
        load_hypotheses(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_plugin_module_is_one_line(plugin_dir):
    folder, _, name = plugin_dir
    path = _claims(folder, '["no_such_markers"]', measure=name)
    assert _one_line_error(path) == (
        f"plug-in module 'no_such_markers' (from {path}:2): ModuleNotFoundError: No module named "
        f"'no_such_markers' (looked in {folder.resolve()} and sys.path)")


def test_missing_plugin_file_is_one_line(plugin_dir):
    folder, _, name = plugin_dir
    path = _claims(folder, '["lib/absent.py"]', measure=name)
    assert _one_line_error(path) == (
        f"plug-in module 'lib/absent.py' (from {path}:2): no such file {folder / 'lib' / 'absent.py'}")


def test_plugin_with_a_syntax_error_is_one_line(plugin_dir):
    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text("def broken(:\n    pass\n")
    message = _one_line_error(_claims(folder, f'["{module}"]', measure=name))
    assert message.startswith(f"plug-in module '{module}' (from ")
    assert f"SyntaxError: invalid syntax ({module}.py, line 1)" in message


def test_plugin_raising_on_import_is_one_line(plugin_dir):
    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text("raise RuntimeError('needs a GPU')\n")
    message = _one_line_error(_claims(folder, f'["{module}"]', measure=name))
    assert message.endswith("): RuntimeError: needs a GPU")
    assert module not in sys.modules


def test_plugin_defining_no_kind_is_one_line(plugin_dir):
    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text("X = 1\n")
    message = _one_line_error(_claims(folder, f'["{module}"]', measure=name))
    assert f"plug-in module '{module}' (from " in message
    assert message.endswith("defines no measurement kind (register a measurement kind in it; a "
                            "kind registers with @register_measurement(name, spec=...))")


def test_plugin_reusing_a_builtin_name_is_refused_naming_both(plugin_dir):
    folder, module, _ = plugin_dir
    (folder / f"{module}.py").write_text(PLUGIN.format(name="probe_accuracy"))
    message = _one_line_error(_claims(folder, f'["{module}"]', measure="probe_accuracy"))
    assert f"plug-in module '{module}' (from " in message
    assert ("ConfigError: measurement kind 'probe_accuracy' is already registered by "
            "probekit.hypotheses.kinds.probe_accuracy.probe_accuracy; "
            f"{module}.offset_kind cannot register the same name") in message
    # the built-in is untouched
    assert MEASUREMENT_KINDS.origin("probe_accuracy").startswith("probekit.hypotheses.kinds.")


def test_plugin_shadowed_by_another_imported_module_is_refused(plugin_dir):
    folder, module, name = plugin_dir
    (folder / "json.py").write_text("X = 1\n")
    message = _one_line_error(_claims(folder, '["json"]', measure=name))
    assert "a different module 'json' is already imported from" in message


@pytest.mark.parametrize("table, match", [
    ('modules = "my_markers"', r"\[plugins\] modules = 'my_markers': expected a non-empty list"),
    ("modules = []", r"\[plugins\] modules = \[\]: expected a non-empty list"),
    ('module = ["x"]', r"\[plugins\] module: unknown key; the only key is modules"),
])
def test_bad_plugins_table_is_refused_at_its_line(tmp_path, table, match):
    from probekit.hypotheses import load_hypotheses

    path = _claims(tmp_path, '["x"]', measure="weight_norm")
    path.write_text(path.read_text().replace('modules = ["x"]', table))
    with pytest.raises(ConfigError, match=f"claims.toml:2: {match}"):
        load_hypotheses(path)


def test_entry_point_plugins_are_discovered(plugin_dir, monkeypatch):
    """A distribution on ``sys.path`` declaring ``probekit.kinds`` entry points (a dist-info)."""
    from probekit.hypotheses import get_kind

    folder, module, name = plugin_dir
    site = folder / "site"
    (site / "mykinds-1.0.dist-info").mkdir(parents=True)
    (folder / f"{module}.py").rename(site / f"{module}.py")
    (site / "mykinds-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mykinds\nVersion: 1.0\n")
    (site / "mykinds-1.0.dist-info" / "entry_points.txt").write_text(
        f"[probekit.kinds]\noffsets = {module}\n")
    monkeypatch.syspath_prepend(str(site))
    MEASUREMENT_KINDS.rescan()  # the next lookup imports the built-ins and the entry points
    assert get_kind(name).spec.__module__ == module
    from probekit.hypotheses.plugins import kind_origins

    line = next(o.line() for o in kind_origins() if o.name == name)
    assert "(from entry point 'offsets' in group 'probekit.kinds' of distribution 'mykinds')" in line


def _entry_points(monkeypatch, *eps):
    """Installed entry points of ``probekit.kinds`` replaced by ``eps`` (rescanned)."""
    import importlib.metadata as md

    monkeypatch.setattr(md, "entry_points", lambda group=None: list(eps) if group == "probekit.kinds" else [])
    MEASUREMENT_KINDS.rescan()


def test_broken_entry_point_stops_only_lookups_no_other_plugin_answers(plugin_dir, monkeypatch):
    """A broken installed plug-in: built-in kinds still work; an unknown name gives its error."""
    import importlib.metadata as md

    from probekit.hypotheses import get_kind

    _entry_points(monkeypatch, md.EntryPoint(name="broken", value="no_such_kinds_pkg",
                                             group="probekit.kinds"))
    for _ in range(2):
        assert get_kind("weight_norm").name == "weight_norm"  # not imported: not needed
    assert MEASUREMENT_KINDS.broken() == ()
    error = ("plug-in module 'no_such_kinds_pkg' (from entry point 'broken' in group "
             "'probekit.kinds'): ModuleNotFoundError: No module named 'no_such_kinds_pkg'")
    with pytest.raises(ConfigError) as info:
        get_kind("kind_of_the_broken_plugin")
    message = str(info.value)
    assert message.startswith("unknown measurement kind 'kind_of_the_broken_plugin'")
    assert message.endswith(f"; installed plug-ins that failed to import: {error}")
    assert "\n" not in message and MEASUREMENT_KINDS.broken() == (error,)
    monkeypatch.undo()
    MEASUREMENT_KINDS.rescan()
    assert get_kind("weight_norm").name == "weight_norm"


def test_entry_points_are_imported_lazily_per_file(plugin_dir, monkeypatch):
    """A claim file using only built-in kinds imports no entry point; one naming its kind does,
    and a broken second plug-in stops neither file."""
    import importlib.metadata as md

    from probekit.hypotheses import load_hypotheses

    folder, module, name = plugin_dir
    monkeypatch.syspath_prepend(str(folder))
    _entry_points(monkeypatch,
                  md.EntryPoint(name="zz_broken", value="no_such_kinds_pkg", group="probekit.kinds"),
                  md.EntryPoint(name="offsets", value=module, group="probekit.kinds"))
    builtin = _claims(folder, "[]", measure="weight_norm")
    builtin.write_text(builtin.read_text().replace("[plugins]\nmodules = []\n", "")
                       .replace("offset = 2.0\n", ""))
    (claim,) = load_hypotheses(builtin).claims
    assert claim.measure == "weight_norm" and module not in sys.modules
    plugin = _claims(folder, "[]", measure=name)
    plugin.write_text(plugin.read_text().replace("[plugins]\nmodules = []\n", ""))
    (claim,) = load_hypotheses(plugin).claims
    assert claim.spec.offset == 2.0 and module in sys.modules
    assert MEASUREMENT_KINDS.broken() == ()  # found before the broken one was needed


def test_plugin_exiting_at_import_is_one_line_exit_2(plugin_dir, capsys):
    """``sys.exit(0)`` in a plug-in's module body: exit 2 and the plug-in named, not exit 0."""
    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text("import sys\nsys.exit(0)\n")
    path = _claims(folder, f'["{module}"]', measure=name)
    assert main(["test", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"probekit test: error: plug-in module '{module}' (from {path}:2): SystemExit: the plug-in "
                   "called sys.exit(0) (a plug-in must not exit)"]


def test_entry_point_exiting_at_import_is_recorded_not_raised(plugin_dir, monkeypatch):
    import importlib.metadata as md

    from probekit.hypotheses import get_kind

    folder, module, _ = plugin_dir
    (folder / f"{module}.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(folder))
    _entry_points(monkeypatch, md.EntryPoint(name="exits", value=module, group="probekit.kinds"))
    assert "weight_norm" in MEASUREMENT_KINDS.names()  # every plug-in imported: this one fails
    (error,) = MEASUREMENT_KINDS.broken()
    assert error.endswith("SystemExit: the plug-in called sys.exit(3) (a plug-in must not exit)")
    assert get_kind("weight_norm").name == "weight_norm"


def test_list_kinds_names_an_installed_plugin_that_failed(plugin_dir, monkeypatch, capsys):
    import importlib.metadata as md

    _entry_points(monkeypatch, md.EntryPoint(name="broken", value="no_such_kinds_pkg",
                                             group="probekit.kinds"))
    assert main(["test", "--list-kinds"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("not loaded: plug-in module 'no_such_kinds_pkg' (from entry point 'broken' in "
                    "group 'probekit.kinds'): ModuleNotFoundError: No module named 'no_such_kinds_pkg'")


def test_diagnosis_file_markers_from_a_plugin(plugin_dir):
    from probekit.diagnosis.spec import load_diagnosis

    folder, module, name = plugin_dir
    path = folder / "diagnose.toml"
    path.write_text(textwrap.dedent(f'''\
        [plugins]
        modules = ["{module}"]
        [population]
        checkpoints = "{ROOT}/probes/checkpoints/modadd-p53-series/step_*"
        [data]
        label = "answer"
        [[marker]]
        name = "offset"
        measure = "{name}"
        offset = 4.0
        [diagnosis]
        outcome = "id_accuracy"
        groups = ""
        '''))
    spec = load_diagnosis(path)
    (marker,) = spec.markers
    assert marker.measure == name and marker.spec.offset == 4.0
    assert type(marker.spec).__module__ == module
    assert spec.plugins == (module,) and spec.to_dict()["plugins"] == {"modules": [module]}
    assert _WORKER_IMPORTS[module].folder == str(folder.resolve())


def test_shipped_example_claim_file_passes(capsys):
    """docs/examples/plugin/claims.toml through the CLI: the plug-in kind PASSes."""
    saved_imports, saved_path = dict(_WORKER_IMPORTS), list(sys.path)
    try:
        with MEASUREMENT_KINDS.temporary():
            code = main(["test", str(ROOT / "docs/examples/plugin/claims.toml"), "--quiet"])
    finally:
        sys.modules.pop("my_markers", None)
        sys.path[:] = saved_path
        _WORKER_IMPORTS.clear()
        _WORKER_IMPORTS.update(saved_imports)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS         the residues' embedding rows have a mean norm in [0.8, 1.2]: mean W_E token norm 0.977" in out


@pytest.mark.slow  # a fresh interpreter and a spawned worker: ~20 s on 2 cores
def test_a_script_without_a_main_guard_runs_the_plugin_under_processes(tmp_path):
    """The user's script starts the processes executor at module level (no ``__main__`` guard):
    the workers import the plug-in and do not re-run the script (which would fail with
    BrokenProcessPool). The script's own lines run once (its marker file is written once)."""
    import os
    import subprocess

    script = tmp_path / "drive.py"
    script.write_text(textwrap.dedent(f'''\
        from probekit.executors.processes import ProcessExecutor
        from probekit.hypotheses import load_hypotheses, run

        with open({str(tmp_path / "ran.txt")!r}, "a") as fh:
            fh.write("ran\\n")
        spec = load_hypotheses({str(ROOT / "docs/examples/plugin/claims.toml")!r})
        result = run(spec, executor=ProcessExecutor(workers=1, progress=False))
        print(result.lines()[0])
        '''))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("PASS         the residues' embedding rows have a mean norm")
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


def test_plugin_missing_a_dependency_names_the_dependency(plugin_dir):
    folder, module, name = plugin_dir
    (folder / f"{module}.py").write_text("import no_such_dependency_xyz\n")
    message = _one_line_error(_claims(folder, f'["{module}"]', measure=name))
    assert message.endswith(f"plug-in module '{module}' (from {folder / 'claims.toml'}:2): "
                            "ModuleNotFoundError: No module named 'no_such_dependency_xyz' (a "
                            "module the plug-in imports: install it)")


def test_test_command_without_files_or_list_kinds_is_one_line_exit_2(capsys):
    assert main(["test"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs at least one hypothesis file (or --list-kinds)" in err[0]


@pytest.mark.slow  # 5 checkpoints' outcomes and markers in 2 worker processes: ~60 s on 2 cores
def test_shipped_example_diagnosis_measures_the_plugin_marker_in_workers(tmp_path, monkeypatch):
    """docs/examples/plugin/diagnose.toml under ``--executor processes``: markers.csv holds the
    plug-in marker of every checkpoint, equal to the L2 norms of its ``W_E`` rows computed here."""
    import csv

    from probekit.models import load_checkpoint

    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    saved_imports, saved_path = dict(_WORKER_IMPORTS), list(sys.path)
    try:
        with MEASUREMENT_KINDS.temporary():
            code = main(["diagnose", str(ROOT / "docs/examples/plugin/diagnose.toml"), "--quiet",
                         "--out", str(tmp_path / "out"), "--executor", "processes", "--workers", "2"])
    finally:
        sys.modules.pop("my_markers", None)
        sys.path[:] = saved_path
        _WORKER_IMPORTS.clear()
        _WORKER_IMPORTS.update(saved_imports)
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "out" / "markers.csv").open()))
    assert [int(r["step"]) for r in rows] == [0, 50, 100, 200, 1000]
    for row in rows:
        w_e = load_checkpoint(row["checkpoint"]).W_E.detach().double()[:53]
        assert float(row["row_norm"]) == pytest.approx(float(w_e.norm(dim=1).mean()), rel=1e-9)
