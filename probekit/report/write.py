"""Write a suite result as ``report.json`` + self-contained ``report.html`` + resolved config."""

from __future__ import annotations

import base64
import copy
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import jinja2

from ..util.io import atomic_write_text
from . import plots

_PACKAGES = {"probekit": "probekit-interp", "torch": "torch", "transformer-lens": "transformer-lens",
             "transformers": "transformers", "scikit-learn": "scikit-learn", "numpy": "numpy",
             "scipy": "scipy"}


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


def render_html(report: dict[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("probekit.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    view = copy.deepcopy(report)
    alpha = report["suite"]["stats"]["alpha"]
    for entry in view["probes"]:
        b64 = lambda png: base64.b64encode(png).decode()  # noqa: E731
        entry["plots"] = {
            "metric": b64(plots.metric_by_layer(entry)),
            "selectivity": b64(plots.selectivity_plot(entry)) if "control" in entry else "",
            "pvalues": b64(plots.pvalue_plot(entry, alpha)) if "permutation" in entry else "",
        }
        entry["ood_names"] = [k.split("/", 1)[1] for k in entry["sweep"]["rows"][0] if k.startswith("ood/")]
        entry.setdefault("selectivity", None)
        entry.setdefault("permutation", None)
        entry.setdefault("ood_gap_at_best", {})
        entry.setdefault("warnings", [])
    return env.get_template("report.html.j2").render(
        name=report["suite"]["name"], description=report["suite"]["description"],
        model=view["model"], data=view["data"], hypotheses=view["hypotheses"],
        probes=view["probes"], versions=view["versions"],
        config_json=json.dumps(report["suite"], indent=2),
    )


def write_report(result: Any, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.html and suite.resolved.json into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = result.to_dict()
    report["versions"] = versions()
    paths = {
        "json": out / "report.json",
        "html": out / "report.html",
        "config": out / "suite.resolved.json",
    }
    atomic_write_text(paths["json"], json.dumps(report, indent=1, default=str))
    atomic_write_text(paths["config"], json.dumps(report["suite"], indent=2, default=str))
    atomic_write_text(paths["html"], render_html(json.loads(json.dumps(report, default=str))))
    return paths
