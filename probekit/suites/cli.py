"""``probekit report SUITE.toml --out DIR``: run a suite, then render its report.

The suite runner (:mod:`probekit.suites.run`) runs the pipeline; :mod:`probekit.report` only
renders the result.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..executor_cli import add_executor_arguments
from ..util.outdir import check_out_dir, claim_out_dir, report_owner

_HELP = """\
Run a suite (TOML) and write report.html, report.json and suite.resolved.json.
The suite and its data file are checked before the model loads (errors name FILE:LINE).

examples:
  probekit report probes/modadd_grokked.toml --out out/demo
  probekit report probes/smollm2_relations.toml --out reports/relations --device cpu
  probekit report probes/modadd_grokked.toml --out out/demo --executor ray --ray-address auto
"""


def execution_from_args(args: argparse.Namespace, suite: Any) -> Any:
    """The suite's ``[execution]`` with the command's executor options applied (``report``, ``test``).

    ``--executor NAME`` alone keeps the file's options when the file names the same executor;
    options given on the command line (``--executor-opt``, a backend's alias) replace them.
    """
    from ..executor_cli import executor_choice

    choice = executor_choice(args)
    if choice is None:
        return suite.execution
    executor, options = choice
    if not options and executor == suite.execution.executor:
        options = suite.execution.options
    try:
        return dataclasses.replace(suite.execution, executor=executor, options=options)
    except ValueError as err:
        raise ConfigError(f"--executor {executor!r}: {err}") from None


def _run(args: argparse.Namespace) -> int:
    from .check import check_suite_data, check_suite_model
    from .spec import load_suite

    if str(args.suite).endswith(".json"):  # a saved report.json: re-render it, verified
        from ..report.write import read_report, write_report

        report = read_report(args.suite)
        name = report["suite"].get("name") if isinstance(report["suite"], dict) else None
        if args.out is not None:
            check_out_dir(args.out, command="report", name=name, inputs=[args.suite],
                          force=args.force, legacy=report_owner("report"))
        if args.check:
            print(f"{args.suite}: report is intact")
            return 0
        if args.out is None:
            raise ConfigError("report REPORT.json needs --out DIR (where the page is re-rendered)")
        with claim_out_dir(args.out, command="report", name=name, inputs=[args.suite],
                           force=args.force, legacy=report_owner("report")):
            paths = write_report(report, args.out)
        print(f"wrote {paths['html']} and {paths['json']}")
        return 0
    suite = load_suite(args.suite)
    rows = check_suite_data(suite)  # FILE:LINE errors before any heavy import or model load
    warnings = check_suite_model(suite, rows)  # layers, vocab, context, class counts
    if args.device is not None:
        from ..util.device import resolve_device

        resolve_device(args.device)  # a clear error for a bad or unavailable device
        suite = dataclasses.replace(suite, device=args.device)
    execution = execution_from_args(args, suite)
    if execution != suite.execution:
        suite = dataclasses.replace(suite, execution=execution)
    owner = {"command": "report", "name": suite.name, "inputs": [args.suite],
             "force": args.force, "legacy": report_owner("report")}
    if args.out is not None:
        check_out_dir(args.out, **owner)  # before any model: a bad --out fails in milliseconds
    if args.check:
        for warning in warnings:  # the run repeats them in its output and report
            print(f"warning: {warning}")
        print(f"{args.suite}: suite and data are valid")
        return 0
    if args.out is None:
        raise ConfigError("report needs --out DIR (where report.html and report.json go)")
    from ..report.write import write_report
    from .run import run_suite

    executor = suite.execution.make_executor(progress=not args.quiet)
    connect = getattr(executor, "connect", None)
    if connect is not None:
        connect()  # an unreachable cluster fails here, before the model loads
    with claim_out_dir(args.out, **owner):  # locked: a second run into --out is refused
        result = run_suite(suite, progress=not args.quiet, executor=executor)
        paths = write_report(result, args.out)
    for analysis in result.analyses:
        for warning in analysis.warnings:
            print(f"warning ({analysis.title}): {warning}")
    for h in result.hypotheses:
        numbers = f"{h.metric}={h.statistic:.3f}"
        if not h.not_testable:  # an untestable hypothesis has no p-value
            numbers += f", effect={h.effect_size:+.3f}, p={h.p_value:.3g}"
        print(f"{h.name} [{h.to_dict()['site_label']}]: {numbers} -> {h.decision()}")
    print(f"wrote {paths['html']} and {paths['json']}")
    return 0


def add_report_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    parser = subparsers.add_parser(
        "report", parents=list(parents),
        help="run a suite (probes/*.toml) and write report.html + report.json",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("suite", help="suite TOML file, e.g. probes/modadd_grokked.toml, or a saved "
                        "report.json to re-render (its checksum verified)")
    parser.add_argument("--out", help="output directory (required unless --check)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--device", default=None, help="override the suite's [suite] device (auto, cpu, cuda)"
    )
    add_executor_arguments(parser)
    parser.add_argument("--check", action="store_true",
                        help="only validate the suite and its data file, then exit")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out that probekit did not write, or "
                        "replace another suite's report there (default: refused)")
    parser.set_defaults(func=_run)
    return parser
