"""The docs cannot drift: every Python block of README.md and the guides runs, every link resolves.

* Each ```python block of ``README.md`` and ``docs/*.md`` is executed, a file's blocks in order
  in one namespace (so a guide sets up its model once), in a temporary working directory that
  links the repository's data folders (``probes/``, ``circuits/``, ``docs/``, ``scripts/``), so
  the paths the docs name resolve and what the blocks write stays out of the checkout.
  A block preceded by ``<!-- doc-test: skip (REASON) -->`` is not run; the reason is required.
  A block whose first line is ``# probekit/PATH.py`` is a template of that package module
  (``docs/architecture.md``): it runs as that module, so its relative imports resolve, and its
  names are then visible to the file's later blocks.
* ```bash / ```console blocks (and the command lines of unlabelled fences) are not run; every
  ``probekit SUBCOMMAND`` they show must be a subcommand of the CLI parser and every repository path they name (``probes/...``,
  ``circuits/...``, ``scripts/...``, ``docs/...``) must exist.
* Every relative link (``[text](path)``, ``![alt](path)``) in ``README.md`` and ``docs/**/*.md``
  must name an existing file or folder (anchors and web links are not checked).
"""

from __future__ import annotations

import os
import re
import sys
import time
import types
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DATA_DIRS = ("probes", "circuits", "docs", "scripts")

_FENCE = re.compile(r"^```(\w*)\s*$")
_MODULE = re.compile(r"^#\s*(?P<path>probekit(?:/\w+)+)\.py\s*$")
_SKIP = re.compile(r"^<!--\s*doc-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->\s*$")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REPO_PATH = re.compile(r"(?<![\w/.$-])((?:probes|circuits|scripts|docs)/[\w./*-]*[\w*])")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a markdown file."""

    path: str      # relative to the repository root
    line: int      # 1-based line of the first code line
    lang: str
    code: str
    skip: str | None   # the reason of a doc-test skip marker, if any


def doc_files() -> list[str]:
    """README.md and the top-level guides under docs/, repository-relative."""
    return ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))


def blocks(rel: str) -> list[Block]:
    """Every fenced block of ``rel`` with its language and skip marker."""
    lines = (ROOT / rel).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        skip = _SKIP.match(lines[j].strip()) if j >= 0 else None
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        out.append(Block(path=rel, line=i + 2, lang=m.group(1), code="\n".join(lines[i + 1:end]),
                         skip=skip.group("reason").strip() if skip else None))
        i = end + 1
    return out


def _run_file(rel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Execute ``rel``'s Python blocks in order in one namespace; returns timing lines."""
    for name in DATA_DIRS:
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.syspath_prepend(str(ROOT))
    module = types.ModuleType("__doc_test__")     # a module, so dataclasses resolve its names
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, object] = module.__dict__
    timings = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)      # small problems: 2 OpenMP threads on 2 shared cores spin (~10x)
    with ExitStack() as registries:   # what a guide registers (a toy measure, probe kind) ends with it
        for registry in _registries():
            registries.enter_context(registry.temporary())
        return _run_blocks(rel, namespace, timings, threads)


def _registries() -> list:
    """Every plug-in registry, so a guide's toy entries do not leak into the worker's other tests."""
    from probekit.executor import EXECUTORS
    from probekit.hypotheses.registry import MEASUREMENT_KINDS
    from probekit.probes.kind import PROBE_KINDS
    from probekit.similarity.measure import SIMILARITY_MEASURES
    from probekit.suites.registry import ANALYSES

    return [ANALYSES, EXECUTORS, MEASUREMENT_KINDS, PROBE_KINDS, SIMILARITY_MEASURES]


def _run_blocks(rel: str, namespace: dict[str, object], timings: list[str], threads: int) -> list[str]:
    added: list[str] = []     # template modules put in sys.modules (a real module is left alone)
    try:
        for block in blocks(rel):
            if block.lang != "python" or block.skip is not None:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            scope = _module_scope(block, added) or namespace
            exec(compile(block.code, f"{rel}:{block.line}", "exec"), scope)  # noqa: S102
            if scope is not namespace:            # the template module's names, for later blocks
                namespace.update({k: v for k, v in scope.items() if not k.startswith("__")})
            timings.append(f"{rel}:{block.line} {time.perf_counter() - t0:.1f} s wall, "
                           f"{time.process_time() - c0:.1f} s CPU")
    finally:
        torch.set_num_threads(threads)
        for name in added:
            sys.modules.pop(name, None)
    return timings


def _module_scope(block: Block, added: list[str]) -> dict[str, object] | None:
    """The globals of the package module a template block is (``# probekit/PATH.py``), or None.

    A module not in ``sys.modules`` is put there (its name appended to ``added``), so that
    dataclasses and registries find it; a real module of that name is left as it is.
    """
    first = block.code.lstrip().partition("\n")[0]
    m = _MODULE.match(first.strip())
    if m is None:
        return None
    name = m.group("path").replace("/", ".")
    module = types.ModuleType(name)
    module.__package__ = name.rpartition(".")[0]
    if name not in sys.modules:
        sys.modules[name] = module
        added.append(name)
    return module.__dict__


RUN_FILES = [f for f in doc_files() if any(b.lang == "python" for b in blocks(f))]


@pytest.mark.parametrize("rel", RUN_FILES)
def test_python_blocks_run(rel, tmp_path, monkeypatch, capsys):
    """Every Python block of the file runs (in order, one namespace), on the tiny checkpoints.

    ``PROBEKIT_DOC_TIMINGS=1 pytest -s tests/test_docs.py`` prints each block's wall and CPU time.
    """
    timings = _run_file(rel, tmp_path, monkeypatch)
    with capsys.disabled():
        if os.environ.get("PROBEKIT_DOC_TIMINGS"):
            print("\n" + "\n".join(timings))


@pytest.mark.parametrize("rel", doc_files())
def test_skip_markers_name_a_reason_and_a_python_block(rel):
    """A skip marker stands right before a Python block and says why it does not run."""
    lines = (ROOT / rel).read_text().splitlines()
    marked = {b.line for b in blocks(rel) if b.skip is not None}
    for i, line in enumerate(lines):
        if "doc-test:" in line:
            assert _SKIP.match(line.strip()), f"{rel}:{i + 1}: malformed marker {line!r}; " \
                "write <!-- doc-test: skip (REASON) -->"
            nxt = next(k for k in range(i + 1, len(lines)) if lines[k].strip())
            assert lines[nxt].startswith("```python") and nxt + 2 in marked, \
                f"{rel}:{i + 1}: a skip marker must stand right before a ```python block"


def _cli_commands() -> set[str]:
    import argparse

    from probekit.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def _shell_lines(rel: str):
    for b in blocks(rel):
        if b.lang not in ("bash", "console", "sh", "shell", ""):
            continue
        for k, raw in enumerate(b.code.splitlines()):
            line = raw.split(" #", 1)[0].strip()
            if b.lang == "" and not line.startswith(("probekit ", "python scripts/")):
                continue              # an unlabelled fence: only its command lines
            if b.lang == "console":
                if not line.startswith("$ "):
                    continue          # program output
                line = line[2:]
            yield b.line + k, line


def shell_problems(rel: str, commands: set[str]) -> list[str]:
    """Unknown ``probekit`` subcommands and missing repository paths in ``rel``'s shell blocks."""
    problems = []
    for lineno, line in _shell_lines(rel):
        for m in re.finditer(r"(?:^|[\s;&|(])probekit\s+([a-z][\w-]*)", line):
            if m.group(1) not in commands:
                problems.append(f"{rel}:{lineno}: 'probekit {m.group(1)}' is no subcommand "
                                f"(have {sorted(commands)})")
        for m in _REPO_PATH.finditer(line):
            path = m.group(1)
            if not (list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                problems.append(f"{rel}:{lineno}: {path} does not exist")
    return problems


LINK_FILES = ["README.md", "CONTRIBUTING.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("rel", LINK_FILES)
def test_shell_blocks_name_real_commands_and_files(rel):
    """Each ``probekit X`` shown is a CLI subcommand; each repository path named exists."""
    problems = shell_problems(rel, _cli_commands())
    assert not problems, "\n".join(problems)


def test_shell_check_finds_unknown_commands_and_paths(tmp_path, monkeypatch):
    """A made-up subcommand and a missing suite are reported; output lines and comments are not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "a.toml").write_text("")
    (tmp_path / "g.md").write_text(
        "```bash\nprobekit report probes/a.toml  # probekit nope probes/zz.toml\n"
        "probekit frobnicate probes/b.toml\n```\n"
        "```console\n$ probekit test probes/*.toml\nprobekit bogus output line\n```\n")
    assert shell_problems("g.md", {"report", "test"}) == [
        "g.md:3: 'probekit frobnicate' is no subcommand (have ['report', 'test'])",
        "g.md:3: probes/b.toml does not exist"]


def _prose(path: Path) -> str:
    """The markdown text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file (lower case, punctuation dropped, - for space)."""
    out: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        k, name = 0, slug
        while name in out:             # repeated headings get -1, -2, ...
            k += 1
            name = f"{slug}-{k}"
        out.add(name)
    return out


@pytest.mark.parametrize("rel", LINK_FILES)
def test_relative_links_resolve(rel):
    """Every relative link or image names an existing file (relative to the file) and heading."""
    base = (ROOT / rel).parent
    broken = []
    for m in _LINK.finditer(_prose(ROOT / rel)):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue                  # web link, mailto:
        path, _, anchor = target.partition("#")
        dest = (base / path) if path else (ROOT / rel)
        if not dest.exists():
            broken.append(f"{rel}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{rel}: {target} (no heading #{anchor} in {path or rel})")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_anchor_slugs_follow_github(tmp_path):
    """Slugs as GitHub makes them, on headings this repository uses."""
    md = tmp_path / "x.md"
    md.write_text("# Hypothesis tests (`probekit test`)\n## Patching reports: `probekit patch` and "
                  "`[[patching]]`\n```\n# not a heading\n```\n## An & Du\n## An & Du\n")
    assert anchors(md) == {"hypothesis-tests-probekit-test",
                           "patching-reports-probekit-patch-and-patching", "an--du", "an--du-1"}


def test_blocks_read_languages_lines_and_skip_reasons(tmp_path, monkeypatch):
    """Each fence's language, first code line and skip reason are read; unmarked blocks run."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "g.md").write_text("text\n```python\na = 1\n```\n\n<!-- doc-test: skip (trains "
                                   "175 models) -->\n```python\nb = 2\n```\n```bash\nls\n```\n")
    got = [(b.lang, b.line, b.code, b.skip) for b in blocks("g.md")]
    assert got == [("python", 3, "a = 1", None), ("python", 8, "b = 2", "trains 175 models"),
                   ("bash", 11, "ls", None)]


def test_a_template_block_runs_as_its_package_module(tmp_path, monkeypatch):
    """``# probekit/PATH.py`` first: relative imports resolve there; later blocks see its names."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "t.md").write_text(
        "```python\n# probekit/suites/analyses/doc_toy.py\nfrom ..registry import ANALYSES\n"
        "where = __name__\n```\n```python\nfound = (where, ANALYSES.what, __name__)\n```\n")
    namespace: dict[str, object] = {"__name__": "__doc_test__"}
    _run_blocks("t.md", namespace, [], torch.get_num_threads())
    assert namespace["found"] == ("probekit.suites.analyses.doc_toy", "analysis section", "__doc_test__")
    assert "probekit.suites.analyses.doc_toy" not in sys.modules
