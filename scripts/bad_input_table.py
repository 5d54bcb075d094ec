"""Write the bad-input table of docs/reports.md from the ``CASES`` lists of the bad-input tests.

Every ``tests/bad_input/test_round*_*.py`` module holds a module-level ``CASES`` list of dicts
with the keys ``id``, ``surface``, ``input`` and ``message`` (the expected one-line error's
fragment); each test module drives its parametrized tests from that list, so the table lists
exactly the inputs that are tested. A module with a ``HEADING`` string gets its own table
under that heading, after the table of the modules without one. The table replaces the text between :data:`START` and
:data:`END` in docs/reports.md.

    python scripts/bad_input_table.py          # rewrite the section
    python scripts/bad_input_table.py --check  # exit 1 if the section is out of date
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reports.md"
PATTERN = "tests/bad_input/test_round*_*.py"
START = "<!-- bad-input-table:start (scripts/bad_input_table.py writes this section) -->"
END = "<!-- bad-input-table:end -->"
KEYS = ("id", "surface", "input", "message")


def load_cases(root: Path = ROOT) -> list[tuple[str, dict[str, Any]]]:
    """``(module file name, case)`` for every case of every ``test_round*_*.py``, in file order.

    Each case carries its module's ``HEADING`` (``""`` if none) under the key ``_heading``.
    """
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # the test modules import tests.conftest
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(root.glob(PATTERN)):
        spec = importlib.util.spec_from_file_location(f"_bad_input_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        heading = getattr(module, "HEADING", "")
        for case in getattr(module, "CASES", []):
            missing = [k for k in KEYS if k not in case]
            if missing:
                raise SystemExit(f"{path.name}: case {case.get('id')!r} lacks {missing}")
            out.append((path.name, {**case, "_heading": heading}))
    return out


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(cases: list[tuple[str, dict[str, Any]]]) -> str:
    """The markdown tables (one row per case; one table per heading) between the markers."""
    headings = list(dict.fromkeys(case.get("_heading", "") for _, case in cases))
    lines = [START]
    for heading in sorted(headings, key=bool):  # the modules without a heading first
        lines += [""] + ([f"#### {heading}", ""] if heading else [])
        lines += ["| id | surface | input | error message (fragment; exit status 2) | test file |",
                  "|---|---|---|---|---|"]
        for name, case in cases:
            if case.get("_heading", "") == heading:
                lines.append(f"| `{_cell(case['id'])}` | {_cell(case['surface'])} | "
                             f"{_cell(case['input'])} | `{_cell(case['message'])}` | `{name}` |")
    lines += ["", END]
    return "\n".join(lines)


def updated(doc: str, table: str) -> str:
    """``doc`` with the section replaced (appended under a heading if the markers are absent)."""
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        return head + table + rest.split(END, 1)[1]
    return doc.rstrip("\n") + "\n\n## Bad input: the tested table\n\n" + table + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` verify) the section of docs/reports.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the section is stale")
    args = parser.parse_args(argv)
    doc = DOC.read_text()
    new = updated(doc, render(load_cases()))
    if args.check:
        if new != doc:
            print(f"{DOC}: the bad-input table is out of date; run python scripts/bad_input_table.py")
            return 1
        return 0
    DOC.write_text(new)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
