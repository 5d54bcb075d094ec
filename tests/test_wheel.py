"""The built wheel works outside the repository (issue 47, section 1).

Builds the wheel from a copy of the files it is made of (so the build leaves nothing in the
checkout), unpacks it into an empty folder put on PYTHONPATH (the dependencies come from the
running interpreter's environment), and from another empty folder runs `probekit demo`,
`probekit examples list` and `probekit examples copy`. Slow: the demo fits probes (about a
minute on an idle 2-core machine).
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _env(site: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(PYTHONPATH=str(site), PROBEKIT_CACHE=str(cache), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg",
               # one thread: on a loaded machine the default threads make the demo 10x slower
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    from importlib.metadata import PackageNotFoundError, version

    try:
        have = version("setuptools")
    except PackageNotFoundError:
        have = "none"
    major = int(have.split(".")[0]) if have[0].isdigit() else 0
    assert major >= 77, (f"building the wheel without isolation needs setuptools>=77 (PEP 639 "
                         f"licence fields), found {have}: pip install 'setuptools>=77'")
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("probekit", "probes", "circuits"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for table in REPO.glob("docs/diagnosis/*/markers.csv"):
        (src / table.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(table, src / table.relative_to(REPO))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, capture_output=True, timeout=600)
    (path,) = out.glob("probekit_interp-*.whl")
    return path


def test_wheel_holds_the_examples_and_the_licence(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = z.read(metadata).decode()
        licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licence) == 1
        assert z.read(licence[0]) == (REPO / "LICENSE").read_bytes()
        examples = {n.removeprefix("probekit/_examples/") for n in names
                    if n.startswith("probekit/_examples/")}
        size = sum(i.file_size for i in z.infolist() if i.filename.startswith("probekit/_examples/"))
    assert "License-File: LICENSE" in meta
    assert "License-Expression: " in meta
    assert "Requires-Python: >=3.11" in meta
    assert "Classifier: Programming Language :: Python :: 3.11" in meta
    assert "Project-URL: Source, " in meta
    expected = {p.relative_to(REPO).as_posix()
                for folder in ("probes", "circuits") for p in (REPO / folder).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    expected |= {p.relative_to(REPO).as_posix() for p in REPO.glob("docs/diagnosis/*/markers.csv")}
    assert examples == expected
    assert size < 8e6  # the five series checkpoints are most of it (0.85 MB each)


def test_demo_and_examples_run_from_an_empty_folder(wheel, tmp_path):
    site, work, cache = tmp_path / "site", tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    env = _env(site, cache)
    where = _run(["-c", "import probekit; print(probekit.__file__)"], work, env)
    assert Path(where.strip()).is_relative_to(site)

    listed = _run(["-m", "probekit.cli", "examples", "list"], work, env)
    assert "modadd_grokked" in listed
    assert listed.strip().splitlines()[-1].startswith("36 examples")

    out = _run(["-m", "probekit.cli", "demo", "--out", "demo", "--quiet"], work, env)
    assert (work / "demo/report.html").stat().st_size > 10_000
    assert (work / "demo/report.json").stat().st_size > 1_000
    assert "open demo/report.html" in out

    copied = _run(["-m", "probekit.cli", "examples", "copy", "modadd_fourier", "mine"], work, env)
    assert "circuits/modadd_fourier.toml" in copied
    assert (work / "mine/probes/checkpoints/modadd-p53/model.safetensors").is_file()
    check = _run(["-m", "probekit.cli", "test", "circuits/modadd_fourier.toml", "--check"],
                 work / "mine", env)
    assert "hypothesis file is valid" in check
    assert sorted(p.name for p in work.iterdir()) == ["demo", "mine"]  # nothing else written
