"""``probekit diagnose FILE.toml [FILE_B.toml] [--out DIR] [--check] [--plan] [--recompute [MARKER]] [--executor NAME]``.

Exit status: 0 when the diagnosis ran (or ``--check`` found the file valid, or ``--plan``'s
design reaches its target), 2 on a spec or data error, or a design that cannot reach its
``target_mde`` (one line, from the top-level CLI).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
            from ..errors import ConfigError

            raise ConfigError("--plan / --target-mde plan one grid population before training; "
                              "give one diagnosis file and no --table")
        if args.plan:
            return _plan(args)
    if len(args.file) != 1:  # two populations side by side
        from .compare_cli import run_compare_cli

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
    from ..errors import ConfigError
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
