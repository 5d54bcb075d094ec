"""Import rules between probekit's layers (issue 18 §4), checked on the source with ``ast``.

* no module imports another subpackage's private module or private name (``_x``);
* ``stats``, ``util``, ``sites``, ``fingerprint``, ``models.protocol`` and ``report.blocks`` are leaves: they import nothing else from probekit
  (``util`` and ``stats`` may raise ``probekit.errors``; ``stats`` results display themselves
  through ``report.blocks`` and ``report.notebook``; ``fingerprint`` re-exports ``models.identity``);
* ``store`` does not import ``capture``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "probekit"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, source: str | None = None) -> list[tuple[str, list[str], int]]:
    """``(absolute module, imported names, line)`` of every import in ``path`` (or ``source``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source if source is not None else path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "probekit" else None


SOURCES = sorted(PKG.rglob("*.py"))


def _violations(path: Path, source: str | None = None) -> list[str]:
    own = _subpackage(_module_name(path))
    bad = []
    for mod, names, line in _imports(path, source):
        target = _subpackage(mod)
        if target is None or target == own:
            continue
        private_mod = [p for p in mod.split(".")[1:] if p.startswith("_") and p != "__init__"]
        # `from probekit.x import y` may name a submodule: treat it like a module path
        private_names = [n for n in names if n.startswith("_") and n != "__version__"]
        if private_mod or private_names:
            bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {mod} {names}")
    return bad


def test_no_cross_package_private_imports():
    bad = [v for p in SOURCES for v in _violations(p)]
    assert bad == [], "make these public (a module without a leading underscore):\n" + "\n".join(bad)


PROTOCOL = "probekit.models.protocol"  # a Protocol class only: leaves may annotate with it
# A result's display (issue 35): typed report blocks (a leaf: plain dataclasses) and the
# notebook mixin, which loads the renderer (jinja2, matplotlib) only inside its methods.
DISPLAY = {"probekit.report.blocks", "probekit.report.notebook"}


@pytest.mark.parametrize(
    ("leaf", "allowed"),
    [("stats", {"probekit.errors", *DISPLAY}), ("optim", set()), ("util", {"probekit.errors"}),
     ("models/protocol.py", set()), ("report/blocks.py", {"probekit.errors"}),
     ("sites.py", {"probekit.errors", PROTOCOL}), ("models/identity.py", {PROTOCOL}),
     ("fingerprint.py", {"probekit.models.identity"})],
)
def test_leaf_modules_import_nothing_else_from_probekit(leaf, allowed):
    files = [PKG / leaf] if leaf.endswith(".py") else sorted((PKG / leaf).rglob("*.py"))
    own = _module_name(files[0]) if leaf.endswith(".py") else f"probekit.{leaf}"
    found = {
        (str(f.relative_to(PKG.parent)), mod)
        for f in files
        for mod, _, _ in _imports(f)
        if (mod == "probekit" or mod.startswith("probekit."))
        and not (mod == own or mod.startswith(own + "."))
        and mod not in allowed
    }
    assert found == set()


def test_store_does_not_import_capture():
    found = [(str(f), m) for f in sorted((PKG / "store").rglob("*.py")) for m, _, _ in _imports(f)
             if _subpackage(m) == "capture"]
    assert found == []


def test_checker_finds_planted_violations():
    as_suites = PKG / "suites" / "run.py"
    planted = (
        "from ..probes._validation import check_n_labels\n"
        "from ..capture.collect import _pad_id\n"
        "from probekit.similarity import _validation\n"
        "from ._private_ok import x\n"  # same package: allowed
        "from ..probes.sweep import sweep_layers\n"  # public: allowed
    )
    assert [v.split(" imports ")[1] for v in _violations(as_suites, planted)] == [
        "probekit.probes._validation ['check_n_labels']",
        "probekit.capture.collect ['_pad_id']",
        "probekit.similarity ['_validation']",
    ]
