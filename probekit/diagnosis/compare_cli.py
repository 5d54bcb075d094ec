"""``probekit diagnose A.toml B.toml``: two diagnoses, then :func:`.statistics.compare.compare_populations`.

Kept apart from :mod:`.statistics.compare` (pure statistics) because it runs the diagnoses (the runner).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, DataError
from .statistics.compare import compare_populations

__all__ = ["check_comparison", "run_compare_cli"]


def _question(path: Any) -> tuple[Any, list[str], list[str]]:
    """A file's checked question: ``(settings, marker names, --check lines)``."""
    from .runner import checked_question
    from .spec import load_diagnosis
    from .table_diagnosis import checked_table_question, is_table_diagnosis, load_table_diagnosis

    if is_table_diagnosis(path):
        return checked_table_question(load_table_diagnosis(path))
    spec = load_diagnosis(path)
    settings, lines = checked_question(spec)
    return settings, [m.name for m in spec.markers], lines


def check_comparison(files: list[Any]) -> list[str]:
    """The rules of a two-population comparison, before either population is diagnosed.

    Each file is checked as on its own; then both must ask the same question (outcome and
    covariates: the comparison tests marker x population under one model) and share a marker.
    Called by ``--check`` and at the start of the run.

    Raises:
        ConfigError: ``B asks outcome 'x' given [...], A outcome 'y' given [...] ...`` or
            ``A and B share no marker (A: [...]; B: [...]) ...``.
    """
    (sa, ma, la), (sb, mb, lb) = _question(files[0]), _question(files[1])
    if sa.outcome != sb.outcome or tuple(sa.covariates) != tuple(sb.covariates):
        raise ConfigError(f"{files[1]} asks outcome {sb.outcome!r} given {list(sb.covariates)}, "
                          f"{files[0]} outcome {sa.outcome!r} given {list(sa.covariates)}: a "
                          "comparison needs the same question; align their [diagnosis]")
    shared = [m for m in ma if m in mb]
    if not shared:
        raise ConfigError(f"{files[0]} and {files[1]} share no marker ({files[0]}: {ma}; "
                          f"{files[1]}: {mb}); name at least one marker the same in both")
    return [*la, *lb, f"  comparison: outcome {sa.outcome!r}, {len(shared)} shared marker(s) "
                      f"{shared}"]


def _finals(result: Any) -> dict[str, list[Any]]:
    """The final models' rows of a diagnosis result's table (every row without ``final``)."""
    table = result.table
    if "final" not in table:
        return dict(table)
    keep = [i for i, f in enumerate(table["final"]) if f]
    return {c: [v[i] for i in keep] for c, v in table.items()}


def run_compare_cli(args: Any) -> int:
    """``probekit diagnose A.toml B.toml [--out DIR]``: both diagnoses, then the comparison.

    Each file is diagnosed as on its own (a table diagnosis file reads its table; a diagnosis
    file computes or reads its cached population), its outputs in ``DIR/<file stem>``
    (``DIR/A-<stem>``, ``DIR/B-<stem>`` when the two stems are the same:
    :func:`.compare_report.population_dirs`); then
    :func:`compare_populations` on the two final tables with the first file's question
    (outcome, covariates, groups and ``[diagnosis]`` analysis keys; the second must ask the same
    outcome and covariates), written to ``DIR/report.html`` (a page that stands alone:
    :func:`.compare_report.comparison_report`), ``DIR/report.json`` and ``DIR/compare.json``.
    """
    from pathlib import Path

    from ..report.blocks import strict_json
    from ..report.write import write_report
    from ..util.io import atomic_write_text
    from .options import analysis_kwargs
    from .runner import diagnose
    from .spec import load_diagnosis
    from .table_diagnosis import diagnose_table, is_table_diagnosis

    files = [Path(f) for f in args.file]
    if len(files) != 2:
        raise ConfigError(f"diagnose takes one file, or two to compare; got {len(files)}")
    if args.table is not None:
        raise ConfigError("--table takes one diagnosis file; to compare two tables give two "
                          "table diagnosis files ([population] table = ...)")
    lines = check_comparison(files)  # the --check rules, before either population is diagnosed
    if args.check:
        print("\n".join(lines))  # noqa: T201
        return 0
    from .compare_report import comparison_report, population_dirs

    labels = (files[0].stem, files[1].stem)
    if labels[0] == labels[1]:
        labels = (str(files[0]), str(files[1]))
    dirs = population_dirs((files[0], files[1]))
    out = Path(args.out) if args.out is not None else None
    results = []
    for f, sub_name in zip(files, dirs, strict=True):
        sub = None if out is None else out / sub_name
        if is_table_diagnosis(f):
            results.append(diagnose_table(f, out=sub))
        else:
            results.append(diagnose(load_diagnosis(f), out=sub, progress=not args.quiet))
    sa, sb = results[0].settings, results[1].settings
    if sa.outcome != sb.outcome or tuple(sa.covariates) != tuple(sb.covariates):
        raise ConfigError(f"{files[1]} asks outcome {sb.outcome!r} given {list(sb.covariates)}, "
                          f"{files[0]} outcome {sa.outcome!r} given {list(sa.covariates)}: a "
                          "comparison needs the same question; align their [diagnosis]")
    if results[0].analysis is None or results[1].analysis is None:
        raise DataError("a population has no applicable marker: nothing to compare")
    names_b = {s.marker for s in results[1].analysis.markers}
    markers = [s.marker for s in results[0].analysis.markers if s.marker in names_b]
    if not markers:
        raise ConfigError(f"{files[0]} and {files[1]} share no marker")
    d = results[0].spec.diagnosis
    kwargs = {k: v for k, v in analysis_kwargs(d).items()
              if k in ("inference", "covariate_coding", "spline_df", "equivalence_margin",
                       "max_permutations")}
    c = compare_populations(_finals(results[0]), _finals(results[1]), sa.outcome,
                            markers=markers, covariates=sa.covariates, groups=sa.groups,
                            labels=labels, n_permutations=d.n_permutations,
                            n_bootstrap=d.n_bootstrap, alpha=d.alpha, seed=d.seed, **kwargs)
    print(f"{labels[0]} vs {labels[1]}: outcome {sa.outcome!r}, covariates "  # noqa: T201
          f"{list(sa.covariates)}, {len(markers)} markers")
    for m in c.markers:
        print(f"  {c.sentence(m)}")  # noqa: T201
    if out is not None:
        report = comparison_report((results[0].to_dict(), results[1].to_dict()), c, dirs)
        write_report(report, out)
        import json

        atomic_write_text(out / "compare.json",
                          json.dumps(strict_json(c.to_dict()), indent=1, allow_nan=False))
        print(f"  wrote {out / 'report.html'}, {out / 'compare.json'} and each population "  # noqa: T201
              f"under {out / dirs[0]} and {out / dirs[1]}")
    return 0
