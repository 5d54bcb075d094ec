"""``probekit diagnose FILE.toml [FILE_B.toml] [--out DIR] [--check] [--plan] [--recompute [MARKER]] [--executor NAME]``.

Exit status: 0 when the diagnosis ran (or ``--check`` found the file valid, or ``--plan``'s
design reaches its target), 2 on a spec or data error, or a design that cannot reach its
``target_mde`` (one line, from the top-level CLI). Two files (``A.toml B.toml``): both
diagnoses, then :func:`~.statistics.compare.compare_populations` on their final tables and one
page that stands alone (:func:`run_compare_cli`; :func:`check_comparison` checks the pair first).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError

_HELP = """\
Diagnose a population of models: which internal markers predict the outcome (e.g. OOD
accuracy), and whether they add anything beyond the design knobs and ID accuracy.

The file names the population (existing checkpoints, a grid of a training preset trained on
demand and cached, or model entries: named offline LMs and Hugging Face directories with their
design columns, scored on your own [outcome] evaluation file), the [[marker]]s (registered measurement kinds, as in `probekit test`) and
the [diagnosis] question. One task per checkpoint computes its outcomes and markers; finished
cells are cached, so a killed run resumes and a new [[marker]] computes only itself.
Writes markers.csv (checkpoint x design, outcomes, markers), markers.json (CIs, not-applicable
reasons), report.html and report.json to --out.

examples:
  probekit diagnose probes/diagnose_modadd_smoke.toml --out out/diagnose_smoke
  probekit diagnose probes/diagnose_modadd.toml --check
  probekit diagnose probes/diagnose_modadd.toml --plan --target-mde 0.3   # power before training
  probekit diagnose probes/diagnose_modadd.toml --out out/modadd --executor ray --ray-address auto
  probekit diagnose probes/diagnose_modadd.toml --table out/modadd/markers.csv --out out/re
  probekit diagnose probes/diagnose_he_study.toml --out docs/diagnosis/he_noise   # [population] table = ...
  probekit diagnose probes/diagnose_real_lms.toml --out out/real_lms   # [population] models = [...]
  probekit diagnose A.toml B.toml --out out/a_vs_b     # two populations: marker x population test
"""


def _run(args: argparse.Namespace) -> int:
    import dataclasses

    from ..suites.cli import execution_from_args
    from ..util.outdir import check_out_dir, claim_out_dir
    from .runner import MIN_MODELS, check_diagnosis, diagnose, recompute_set
    from .spec import load_diagnosis
    from .table_diagnosis import is_table_diagnosis, run_table_cli

    if args.plan or args.target_mde is not None:
        if len(args.file) != 1 or args.table is not None:
            raise ConfigError("--plan / --target-mde plan one grid population before training; "
                              "give one diagnosis file and no --table")
        if args.plan:
            return _plan(args)
    if len(args.file) != 1:  # two populations side by side
        if args.out is not None and not args.check:
            check_out_dir(args.out, command="diagnose", name="compare", inputs=list(args.file),
                          force=args.force, legacy=_legacy_diagnosis)
        return run_compare_cli(args)
    args.file = args.file[0]
    inputs = [args.file] + ([args.table] if args.table is not None else [])
    owner = {"command": "diagnose", "name": Path(args.file).stem, "inputs": inputs,
             "force": args.force, "legacy": _legacy_diagnosis}
    if args.out is not None:
        check_out_dir(args.out, **owner)  # before anything is read, trained or measured
    if args.table is not None or is_table_diagnosis(args.file):
        if args.out is None or args.check:
            return run_table_cli(args)  # analyse an existing table: nothing trained or measured
        with claim_out_dir(args.out, **owner):
            return run_table_cli(args)
    spec = load_diagnosis(args.file)
    if args.target_mde is not None:
        spec = dataclasses.replace(spec, population=dataclasses.replace(
            spec.population, target_mde=args.target_mde))
    execution = execution_from_args(args, spec.suite)  # --executor / --executor-opt
    if execution != spec.suite.execution:
        spec = dataclasses.replace(spec, suite=dataclasses.replace(spec.suite, execution=execution))
    recompute = args.recompute or None
    recompute_set(spec, recompute)  # an unknown marker: refused before any model loads
    lines = check_diagnosis(spec)
    if args.check:
        print("\n".join(lines))
        return 0
    if spec.population.trained and spec.population.target_mde is not None:
        from .plan import check_target

        print(check_target(spec))  # refused (exit 2) before any training when out of reach
    executor = spec.suite.execution.make_executor(progress=not args.quiet)
    connect = getattr(executor, "connect", None)
    if connect is not None:
        connect()  # an unreachable cluster fails here, before any training
    out = Path(args.out) if args.out is not None else None
    if out is None:
        result = diagnose(spec, out=None, executor=executor, progress=not args.quiet,
                          recompute=recompute, checked=True)
    else:
        with claim_out_dir(out, **owner):  # locked: a second run into --out is refused
            result = diagnose(spec, out=out, executor=executor, progress=not args.quiet,
                              recompute=recompute, checked=True)
    n = len(result.table["checkpoint"])
    what = (f"model entr{'y' if n == 1 else 'ies'}" if spec.population.models is not None
            else "checkpoints")
    print(f"{args.file}: {n} {what}, outcome {result.settings.outcome!r}")
    if spec.population.models is not None and n < MIN_MODELS:
        print(f"  no population-level verdict: {n} {what} (the statistics need at least "
              f"{MIN_MODELS}); markers.csv holds the markers and outcomes")
    if result.analysis is not None:
        for stats in result.analysis.markers:
            print(f"  {result.analysis.sentence(stats.marker)}")
    for na in result.not_applicable[:5]:
        print(f"  not applicable: {na['marker']} on {na['checkpoint']}: {na['reason']}")
    if out is not None:
        print(f"  wrote {out / 'markers.csv'}, {out / 'report.html'} and {out / 'report.json'}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    """``--plan``: the planned design's power curve, MDE and cost; exit 2 when it misses its target."""
    from ..util.io import atomic_write_json
    from .plan import plan_power

    plan = plan_power(args.file[0], target_mde=args.target_mde,
                      n_simulations=args.plan_simulations)
    print(f"{args.file[0]}: power-first plan")
    print("\n".join(plan.lines()))
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "plan.json", plan.to_dict())
        print(f"  wrote {out / 'plan.json'}")
    refusal = plan.refusal()
    if refusal is not None:
        raise ConfigError(refusal)
    warning = plan.warning()
    if warning is not None:
        print(f"warning: {warning}")
    return 0


def _legacy_diagnosis(out: Path) -> dict[str, Any] | None:
    """A diagnosis output written before the ownership marker: markers.csv beside report.json."""
    if (out / "markers.csv").is_file() and (out / "report.json").is_file():
        return {"command": "diagnose", "name": None}
    return None


def add_diagnose_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``diagnose`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    from ..suites.cli import add_executor_arguments

    parser = subparsers.add_parser(
        "diagnose", parents=list(parents),
        help="which markers predict a population's OOD outcome beyond the design (diagnose_*.toml)",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", nargs="+",
                        help="diagnosis TOML file (probes/diagnose_*.toml); two files: both "
                        "populations side by side, with a test of each marker's difference")
    parser.add_argument("--out", help="output directory for markers.csv and report.html/json")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--check", action="store_true",
                        help="only validate (spec, grid keys, markers, checkpoints), then exit")
    parser.add_argument("--table", help="analyse this marker table (.csv / .json records, e.g. "
                        "an earlier run's markers.csv) instead of computing the population")
    parser.add_argument("--plan", action="store_true",
                        help="before any training: the planned grid's simulated power curve of "
                        "the report's partial test, its 80%%-power partial r (MDE) and the "
                        "training time; writes plan.json to --out; exit 2 when it cannot reach "
                        "--target-mde / [population] target_mde")
    parser.add_argument("--target-mde", type=float, default=None, metavar="R",
                        help="the partial r the design must detect with 80%% power (overrides "
                        "[population] target_mde); a run whose design cannot reach it is "
                        "refused before training")
    parser.add_argument("--plan-simulations", type=int, default=400, metavar="N",
                        help="simulated populations of --plan (default 400: Monte Carlo SE of "
                        "80%% power 2 points)")
    parser.add_argument("--recompute", nargs="?", const="*", action="append", metavar="MARKER",
                        help="measure MARKER again instead of reading its cached cells (a "
                        "family's name: every member; repeat for several); alone: every marker "
                        "and the outcomes. Plug-in markers are already measured again when the "
                        "plug-in's source changes")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out that probekit did not write, or "
                        "replace another diagnosis there (default: refused)")
    add_executor_arguments(parser)
    parser.set_defaults(func=_run)
    return parser


# ``probekit diagnose A.toml B.toml``: two diagnoses, then
# :func:`.statistics.compare.compare_populations` (the statistics stay in the statistics package;
# running the diagnoses is the pipeline's)


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
    from .options import analysis_kwargs, base_kwargs
    from .runner import diagnose
    from .spec import load_diagnosis
    from .statistics.compare import compare_populations
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
    c = compare_populations(_finals(results[0]), _finals(results[1]), sa.outcome,
                            markers=markers, covariates=sa.covariates, groups=sa.groups,
                            labels=labels, **base_kwargs(d), **analysis_kwargs(d))
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
