"""The report's minimum detectable effect: the partial test's power simulated on the analysed design.

Each marker's ``mde_partial_r`` in a diagnosis report is the 80 %-power partial r of the test
the report ran (:mod:`.statistics.power`: HC3, Freedman-Lane permutations within the groups, at
``alpha / K`` for ``K`` tested markers; a family of layers counts once, :func:`unit_levels`), simulated on the very rows, covariate terms and groups
the marker was analysed on, not the noncentral-t formula (:func:`.statistics.inference.mde_partial_r`),
whose value the test reaches with 65-74 % power only on populations of tens of models.

One simulation per distinct design (markers with the same rows share it), cached by a digest of
the design matrix, the groups, the level and the simulation sizes: in this process, and as a
small JSON file under the probekit cache (``<cache>/power/``), so a report rerun from its table
costs a file read. The report's ``diagnosis.power`` record keeps every curve with its Monte Carlo
SE. ``inference = "cluster"`` (a wild cluster bootstrap, not simulated here) keeps the formula,
and the record says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from probekit.errors import ProbekitError

from .statistics.families import family_name, group_families
from .statistics.power import PowerCurve, simulated_power

__all__ = ["MDE_SIMULATIONS", "design_curve", "unit_levels", "with_simulated_mde"]

#: simulated populations per design (Monte Carlo SE of a power near 80 %: 2 points)
MDE_SIMULATIONS = 400
#: bumped when the simulation changes, so that cached curves are not reused
ENGINE_VERSION = 1
_MEMO: dict[str, PowerCurve] = {}


def _key(C: np.ndarray, g: np.ndarray | None, level: float, n_simulations: int,
         seed: int) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([ENGINE_VERSION, C.shape, round(level, 12), n_simulations, seed,
                         g is not None]).encode())
    h.update(np.round(np.ascontiguousarray(C, dtype=np.float64), 10).tobytes())
    if g is not None:
        h.update(np.ascontiguousarray(g, dtype=np.int64).tobytes())
    return h.hexdigest()[:20]


def _cache_file(key: str) -> Any:
    from ..util.cache import cache_dir

    return cache_dir("power", f"{key}.json")


def design_curve(C: np.ndarray, groups: np.ndarray | None, *, level: float,
                 n_simulations: int = MDE_SIMULATIONS, seed: int = 0,
                 disk: bool = True) -> tuple[PowerCurve, str]:
    """The simulated power curve of a fixed design, from the cache when it has it.

    Returns the curve and its cache key.
    """
    key = _key(C, groups, level, n_simulations, seed)
    if key in _MEMO:
        return _MEMO[key], key
    path = _cache_file(key) if disk else None
    if path is not None and path.is_file():
        try:
            raw = json.loads(path.read_text())
            curve = PowerCurve(**{k: (tuple(math.nan if x is None else x for x in v)
                                      if isinstance(v, list) else (math.nan if v is None else v))
                                  for k, v in raw.items()})
            _MEMO[key] = curve
            return curve, key
        except (OSError, ValueError, TypeError):
            pass  # a damaged cache file: simulate again
    curve = simulated_power(C, groups, level=level, n_simulations=n_simulations, seed=seed)
    _MEMO[key] = curve
    if path is not None:
        from ..util.io import atomic_write_json

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, curve.to_dict())
        except OSError:
            pass  # a read-only cache: the curve is still returned
    return curve, key


def with_simulated_mde(
    analysis: Any, table: Mapping[str, Sequence[Any]], *,
    covariate_coding: Mapping[str, str] | None = None, spline_df: int = 4,
    n_simulations: int = MDE_SIMULATIONS, seed: int = 0,
) -> tuple[Any, dict[str, Any]]:
    """``analysis`` with every marker's ``mde_partial_r`` simulated, and the report's record.

    Args:
        analysis: a :class:`~probekit.diagnosis.MarkerAnalysis` of ``table``.
        table: the analysed table (the rows each marker used are in its ``rows``).
        covariate_coding: the covariate coding the analysis used (``[diagnosis]`` key).
        spline_df: the spline columns the analysis used.
        n_simulations: simulated populations per design; 0 keeps the formula.
        seed: seeds the simulations.

    Returns:
        The analysis (markers replaced) and ``{"source", "n_simulations", "designs": [...]}``,
        each design with its markers, models, level, MDE, Monte Carlo SE, formula value and
        power curve.
    """
    from .statistics.table import as_marker_table

    settings = analysis.settings
    record: dict[str, Any] = {"source": "simulated", "n_simulations": int(n_simulations),
                              "designs": []}
    if settings.get("inference") == "cluster" or n_simulations <= 0:
        record["source"] = "formula"
        record["reason"] = ("n_simulations = 0" if n_simulations <= 0 else
                            "inference = cluster (wild cluster bootstrap) is not simulated: "
                            "noncentral-t formula")
        return analysis, record
    t = as_marker_table(table)
    C, _ = t.design(analysis.covariates, coding=dict(covariate_coding or {}) or None,
                    spline_df=spline_df, groups=analysis.groups)
    g = t.codes(analysis.groups, "groups")[0] if analysis.groups else None
    levels = unit_levels(analysis.markers, float(settings["alpha"]),
                         int(settings.get("n_markers_tested", 1)))
    by_rows: dict[tuple[tuple[int, ...], float], list[str]] = {}
    for s in analysis.markers:
        if s.rows and math.isfinite(s.mde_partial_r):
            by_rows.setdefault((tuple(s.rows), levels[s.marker]), []).append(s.marker)
    mde: dict[str, float] = {}
    for (rows, level), names in by_rows.items():
        idx = np.asarray(rows, dtype=np.int64)
        try:
            curve, key = design_curve(C[idx], None if g is None else g[idx], level=level,
                                      n_simulations=n_simulations, seed=seed)
        except ProbekitError as err:  # e.g. no residual df: the formula stays, the record says why
            record["designs"].append({"markers": names, "n_models": int(idx.size),
                                      "error": str(err)})
            continue
        for name in names:
            mde[name] = curve.mde
        record["designs"].append({"markers": names, "key": key, **curve.to_dict()})
    markers = tuple(dataclasses.replace(s, mde_partial_r=mde[s.marker]) if s.marker in mde
                    else s for s in analysis.markers)
    return dataclasses.replace(analysis, markers=markers), record


def unit_levels(markers: Sequence[Any], alpha: float, n_tested: int) -> dict[str, float]:
    """The level of each marker's first test in the report's weighted Holm procedure.

    Families count once (:mod:`.statistics.families`, the ``NAME@...`` convention): with ``U`` units (a
    family, or a marker outside any), a marker outside a family is first tested at
    ``alpha / U`` and a family's best layer at ``alpha / (U |F|)``. Without families ``U = K``,
    the markers tested: ``alpha / K``. Markers with no MDE (not tested) count in no unit.
    """
    tested = [s.marker for s in markers if math.isfinite(getattr(s, "mde_partial_r", math.nan))]
    families = group_families(tested)
    units = (len(families) + sum(family_name(m) is None for m in tested) if tested
             else max(int(n_tested), 1))
    return {s.marker: alpha / (units * len(families.get(family_name(s.marker) or "", (s,))))
            for s in markers}


def mde_sentence(record: Mapping[str, Any]) -> str | None:
    """One sentence for the report: where the MDE comes from, with its Monte Carlo SE."""
    if record.get("source") != "simulated":
        reason = record.get("reason")
        return f"MDE: noncentral-t formula ({reason})." if reason else None
    parts = []
    for d in record.get("designs", ()):
        if "error" in d:
            parts.append(f"{', '.join(d['markers'])}: not simulated ({d['error']}; formula)")
            continue
        mde = d.get("mde")
        se = d.get("mde_se")
        val = (f"{mde:.2f}" + (f" +- {se:.2f}" if se is not None else "")
               if mde is not None else f"above {d['effects'][-1]:.2f} (80% power not reached)")
        classical = d.get("classical_mde")
        formula = (f"formula {classical:.2f}" if isinstance(classical, (int, float))
                   and math.isfinite(classical) else "no formula value")
        parts.append(f"{val} over {d['n_models']} models ({formula})")
    if not parts:
        return None
    designs = record.get("designs", ())
    levels = sorted({d["level"] for d in designs if "level" in d}, reverse=True)
    level_text = ("-" if not levels else " / ".join(format(v, ".3g") for v in levels))
    n_perm = next((d["n_permutations"] for d in designs if "n_permutations" in d), None)
    return ("MDE (80%-power |partial r|) simulated for this test on this design "
            f"({record['n_simulations']} simulated populations, HC3 + {n_perm} Freedman-Lane "
            f"permutations, level {level_text} = "
            + ("alpha / markers tested" if len(levels) <= 1 else
               "alpha / units tested (a family of layers counts once; its layers at alpha / "
               "(units x layers))")
            + "; +- Monte Carlo SE): "
            + "; ".join(parts) + ".")
