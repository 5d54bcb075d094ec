"""Bad input, round 4 (issue 59, patterns 6, 7 and 9): files, copies, shapes.

``CASES`` is one row per input, as in the round-3 modules (``id``, ``surface``, ``input``,
``message``: the fragment of the one line the user gets, or ``(accepted: ...)``);
``scripts/bad_input_table.py`` renders it into docs/reports.md under :data:`HEADING`. A case
runs either ``cli(root)`` -> argv of ``probekit`` (exit 2 and one ``error:`` line, or exit 0 when
accepted) or ``api(root)`` (raises a probekit error holding the message, or returns when
accepted). Nothing under ``root`` may change, and nothing may be written outside it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from probekit.cli import main
from probekit.errors import ProbekitError

HEADING = "round 4 (files, copies, shapes)"

TOML = '[suite]\nname = "café"\ndescription = "déjà vu"\n[capture]\nsites = ["resid_post@0"]\n'


def _examples(root: Path) -> Path:
    """``root/ex``: a copy of the modadd_grokked example (its suite and checkpoint)."""
    dest = root / "ex"
    if not dest.exists():
        assert main(["examples", "copy", "modadd_grokked", str(dest)]) == 0
    return dest / "probes" / "modadd_grokked.toml"


def _suite_as(root: Path, name: str, encode: Any) -> list[str]:
    suite = _examples(root)
    target = suite.with_name(name)
    target.write_bytes(encode(suite.read_text(encoding="utf-8")))
    return ["report", str(target), "--check"]


def _link(root: Path, rel: str, to: str) -> list[str]:
    link = root / "dest" / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(root.parent / to)  # outside root: nothing may appear there
    return ["examples", "copy", "modadd_grokked", str(root / "dest")]


def _read_toml(root: Path, data: bytes) -> None:
    from probekit.suites.spec import read_toml

    (root / "s.toml").write_bytes(data)
    assert read_toml(root / "s.toml")[2]["suite"]["name"] == "café"


def _read_table(root: Path, encoding: str) -> None:
    from probekit.diagnosis.table_io import read_marker_table, to_columns

    (root / "t.csv").write_bytes("arch,y\ncafé,0.5\nthé,0.25\n".encode(encoding))
    assert to_columns(read_marker_table(root / "t.csv")) == {"arch": ["café", "thé"],
                                                            "y": [0.5, 0.25]}


def _read_jsonl(root: Path, encoding: str) -> None:
    from probekit.inputs import read_jsonl

    rows = [{"text": "déjà", "y": 1}, {"text": "vu", "y": 0}]
    (root / "d.jsonl").write_bytes("\n".join(json.dumps(r) for r in rows).encode(encoding))
    assert [r.data for r in read_jsonl(root / "d.jsonl")] == rows


def _call(fn: str, *shapes: tuple[int, ...], **kwargs: Any) -> None:
    """``fn`` on zero arrays of ``shapes`` (``kwargs``: shapes of keyword arrays, or values).

    Each array is of the type its annotation declares (a tensor, or a numpy array).
    """
    import importlib
    import inspect

    import numpy as np

    package, name = fn.rsplit(".", 1)
    func = getattr(importlib.import_module(package), name)
    layouts = func.__shape_layouts__
    given = dict(zip(inspect.signature(func).parameters, shapes, strict=False))
    given.update(kwargs)

    def array(arg: str, value: Any) -> Any:
        if not isinstance(value, tuple):
            return value
        kind = next(s.array for s in layouts[arg] if not s.any_shape)
        return np.zeros(value) if kind == "numpy" else torch.zeros(value)

    func(**{k: array(k, v) for k, v in given.items()})


CASES: list[dict[str, Any]] = [
    # ---- pattern 6: examples copy
    {"id": "copy-dangling-link", "surface": "probekit examples copy",
     "input": "DIR is a dangling symbolic link", "message": "is a symbolic link (to",
     "cli": lambda r: _link(r, "", "nowhere")},
    {"id": "copy-link-inside", "surface": "probekit examples copy",
     "input": "DIR/probes is a link to a folder outside DIR",
     "message": "probes inside", "cli": lambda r: _link(r, "probes", "outside-folder")},
    {"id": "copy-dangling-file-link", "surface": "probekit examples copy",
     "input": "DIR/probes/modadd_grokked.toml is a dangling link",
     "message": "modadd_grokked.toml inside", "cli": lambda r: _link(r, "probes/modadd_grokked.toml", "gone.toml")},
    {"id": "copy-empty-dir", "surface": "probekit examples copy", "input": 'DIR = ""',
     "message": "examples copy DIR is empty ('')", "cli": lambda r: ["examples", "copy", "all", ""]},
    {"id": "copy-blank-dir", "surface": "probekit examples copy", "input": 'DIR = "  "',
     "message": "examples copy DIR is empty ('  ')", "cli": lambda r: ["examples", "copy", "all", "  "]},
    {"id": "copy-permission-mid-copy", "surface": "probekit examples copy",
     "input": "PermissionError on the third file written",
     "message": "(Permission denied); nothing was copied (the 2 file(s) written before were removed)",
     "cli": lambda r: ["examples", "copy", "modadd_similarity", str(r / "dest")], "fail_third_write": True},
    # ---- pattern 7: one decoder
    {"id": "suite-utf16-bom", "surface": "probekit report --check", "input": "a suite saved as UTF-16 with its mark",
     "message": "(accepted: the byte-order mark names the encoding)",
     "cli": lambda r: _suite_as(r, "u16.toml", lambda t: t.encode("utf-16"))},
    {"id": "suite-utf16-no-bom", "surface": "probekit report --check", "input": "a suite saved as UTF-16 LE without a mark",
     "message": "(accepted: the NUL bytes tell UTF-16 LE)",
     "cli": lambda r: _suite_as(r, "u16le.toml", lambda t: t.encode("utf-16-le"))},
    {"id": "suite-utf16-cut", "surface": "probekit report --check", "input": "UTF-16 without a mark, one byte short",
     "message": "byte 1 is a NUL byte, which no text file holds: not a text file, or UTF-16/UTF-32 "
                "without a byte-order mark; save the file as UTF-8",
     "cli": lambda r: _suite_as(r, "cut.toml", lambda t: t.encode("utf-16-le")[:-1])},
    {"id": "suite-latin-1", "surface": "probekit report --check", "input": "a suite with a Latin-1 é",
     "message": "latin.toml:1:6: byte 0xe9 is not UTF-8; save the file as UTF-8",
     "cli": lambda r: _suite_as(r, "latin.toml", lambda t: b'# caf\xe9 au lait\n' + t.encode())},
    {"id": "toml-utf32", "surface": "read_toml (suites, claims, diagnosis files)", "input": "UTF-32 BE without a mark",
     "message": "(accepted: the NUL bytes tell UTF-32 BE)", "api": lambda r: _read_toml(r, TOML.encode("utf-32-be"))},
    {"id": "table-utf16-no-bom", "surface": "diagnose --table", "input": "a UTF-16 LE CSV without a mark",
     "message": "(accepted: read as UTF-16 LE, not a misleading cell count)", "api": lambda r: _read_table(r, "utf-16-le")},
    {"id": "jsonl-utf16", "surface": "JSONL data / eval files", "input": "a UTF-16 JSONL with its mark",
     "message": "(accepted: the byte-order mark names the encoding)", "api": lambda r: _read_jsonl(r, "utf-16")},
    # ---- pattern 9: shapes at the public tensor entry points
    {"id": "composite-target-widths", "surface": "homomorphism.composite_target",
     "input": "a of width 8, b of width 5",
     "message": "composite_target: b has shape (2, 10, 5) but a has shape (2, 10, 8): 'd' is 5 in b and 8 in a",
     "api": lambda r: _call("probekit.homomorphism.composite_target", (2, 10, 8), (2, 10, 5))},
    {"id": "accuracy-lengths", "surface": "probes.accuracy", "input": "pred of 4 rows, labels of 5",
     "message": "accuracy: labels has shape (5,) but pred has shape (4,): 'n' is 5 in labels and 4 in pred",
     "api": lambda r: _call("probekit.probes.accuracy", (4,), (5,))},
    {"id": "subspace-ablation-k", "surface": "interventions.subspace_ablation",
     "input": "basis of 2 directions, mean of 3 coordinates",
     "message": "subspace_ablation: mean has shape (3,) but basis has shape (2, 6): 'k' is 3 in mean and 2 in basis",
     "api": lambda r: _call("probekit.interventions.subspace_ablation", site=None, basis=(2, 6),
                            mean=(3,))},
    {"id": "restricted-logits-grid", "surface": "grokking.restricted_logits",
     "input": "logits of shape (5, 5, 4)",
     "message": "restricted_logits: logits has shape (5, 5, 4); the axes named 'p' in (p, p, p) must have one size",
     "api": lambda r: _call("probekit.grokking.restricted_logits", (5, 5, 4), keys=[1])},
]


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


def test_cases_have_the_table_keys():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"id", "surface", "input", "message"} <= set(case), case["id"]
        assert ("cli" in case) != ("api" in case), case["id"]


@pytest.fixture
def as_a_user():
    """Calls without the test suite's jaxtyping checks, as a user makes them."""
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", False)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_round4_case(case, tmp_path, capsys, monkeypatch, as_a_user):
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.chdir(root)
    accepted = case["message"].startswith("(accepted")
    argv = case["cli"](root) if "cli" in case else None
    capsys.readouterr()
    if case.get("fail_third_write"):
        import shutil

        calls, real = [], shutil.copyfileobj

        def failing(src, dst, *args):
            calls.append(dst)
            if len(calls) == 3:
                raise PermissionError(13, "Permission denied", dst.name)
            return real(src, dst, *args)

        monkeypatch.setattr("probekit.examples.shutil.copyfileobj", failing)
    before, around = _tree(root), sorted(p.name for p in tmp_path.iterdir())
    if argv is not None:
        code = main(argv)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, captured.err
        if accepted:
            assert code == 0, captured.err
        else:
            lines = [line for line in captured.err.splitlines() if ": error: " in line]
            assert code == 2 and len(lines) == 1, captured.err
            assert case["message"] in lines[0], lines[0]
    elif accepted:
        case["api"](root)
        before = _tree(root)  # the case wrote its own input file
    else:
        with pytest.raises(ProbekitError) as err:
            case["api"](root)
        assert case["message"] in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert _tree(root) == before, "a file was created, changed or removed"
    assert sorted(p.name for p in tmp_path.iterdir()) == around, "something was written outside"


def test_docs_table_lists_every_case():
    """docs/reports.md carries the generated table (scripts/bad_input_table.py) with these rows."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()
    section = doc.split("<!-- bad-input-table:start", 1)[1].split("<!-- bad-input-table:end", 1)[0]
    assert f"#### {HEADING}" in section
    for case in CASES:
        assert f"| `{case['id']}` |" in section, case["id"]
