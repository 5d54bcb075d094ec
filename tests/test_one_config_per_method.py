"""One config per method: an option added to a method's config is a key of every file that reuses it.

The test copies probekit, adds one constrained field to each method config (one line each,
nothing else edited) and, in a fresh interpreter on the copy, loads a suite, a hypothesis file
and a diagnosis file that set the new key: accepted with its value, and a value breaking its
rule is a ``FILE:LINE: [section] key = value: must be ...`` error at the key's line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (config module, the line after which the new field goes, the new line): one edit per method
EDITS = {
    "homomorphism/config.py": ("    batch_size: Annotated[int, Ge(1)] = 128\n",
                               "    n_epochs: Annotated[int, Ge(1)] = 50\n"),
    "neurons/config.py": ("    batch_size: Annotated[int, Ge(1)] = 32\n",
                          "    n_epochs: Annotated[int, Ge(1)] = 50\n"),
    "geometry/config.py": ("    seed: Annotated[int, SEED] = 0\n",
                           "    n_epochs: Annotated[int, Ge(1)] = 50\n"),
}

HEAD = """
[suite]
name = "t"
device = "cpu"

[model]
name = "gpt2"

[data]
task = "scan"
label = "n_clauses"
prompt_only = false
"""

#: (file kind, section, the table's other keys): every surface of the three configs
SURFACES = [
    ("suite", "homomorphism", 'families = ["affine"]'),
    ("claim", "claim", 'measure = "homomorphism_error"\nlayer = 0\ncompare = "<="\nthreshold = 0.5'),
    ("marker", "marker", 'name = "he"\nmeasure = "homomorphism_error"\nlayer = -1'),
    ("suite", "neurons", 'k = 4'),
    ("suite", "geometry", 'max_points = 8'),
    ("claim", "claim", 'measure = "manifold_capacity"\nsite = "resid_post@0"\ncompare = ">="\n'
                       'threshold = 0.5'),
    ("marker", "marker", 'name = "r"\nmeasure = "manifold_radius"\nsite = "resid_post@0"'),
]

SCRIPT = r'''
import json, sys
from pathlib import Path
from probekit.suites.spec import SuiteError, load_suite
from probekit.hypotheses.spec import load_hypotheses
from probekit.diagnosis.spec import load_diagnosis

root, head, surfaces = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
DIAG = ('[suite]\nname = "d"\ndevice = "cpu"\n\n[population]\npreset = "scan"\n'
        'grid = {{ seed = [0, 1] }}\n\n[data]\nlabel = "n_clauses"\nprompt_only = false\n\n'
        '[[marker]]\n{body}\n\n[diagnosis]\noutcome = "id_accuracy"\n')
LOAD = {"suite": lambda p: load_suite(p).analyses[0],
        "claim": lambda p: load_hypotheses(p).claims[0].spec,
        "marker": lambda p: load_diagnosis(p).markers[0].spec}

for i, (kind, section, body) in enumerate(surfaces):
    for value in (7, 0):
        table = f"{body}\nn_epochs = {value}"
        path = root / f"{i}-{value}.toml"
        path.write_text(DIAG.format(body=table) if kind == "marker" else
                        head + f"\n[[{section}]]\n{table}\n")
        line = next(n for n, t in enumerate(path.read_text().splitlines(), 1)
                    if t.startswith("n_epochs"))
        try:
            spec = LOAD[kind](path)
        except SuiteError as err:
            want = f"{path}:{line}: [{section}] n_epochs = 0: must be >= 1"
            assert value == 0 and str(err) == want, (str(err), want)
        else:
            assert value == 7 and spec.n_epochs == 7, (kind, section, spec)
    print(kind, section, "ok")
print("ok")
'''


def _copy_with_edits(dest: Path) -> Path:
    pkg = dest / "probekit"
    shutil.copytree(ROOT / "probekit", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for module, (after, line) in EDITS.items():
        source = (pkg / module).read_text()
        assert source.count(after) == 1, f"{module}: anchor {after!r} not found once"
        (pkg / module).write_text(source.replace(after, after + line))
    return dest


@pytest.mark.parametrize("section", ["homomorphism", "neurons", "geometry"])
def test_the_new_key_is_unknown_without_the_edit(tmp_path, section):
    from probekit.suites.spec import SuiteError, load_suite

    path = tmp_path / "suite.toml"
    path.write_text(HEAD + f"\n[[{section}]]\nn_epochs = 7\n")
    with pytest.raises(SuiteError, match=rf"\[{section}\] n_epochs: unknown key"):
        load_suite(path)


def test_one_edit_of_a_method_config_reaches_suite_claim_and_diagnosis_files(tmp_path):
    copy = _copy_with_edits(tmp_path / "copy")
    work = tmp_path / "files"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(work), HEAD,
                           json.dumps(SURFACES)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
