"""``probekit report SUITE.toml --out DIR``: run a probe suite and write its report."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError

_HELP = """\
Run a probe suite (TOML) and write report.html, report.json and suite.resolved.json.
The suite and its data file are checked before the model loads (errors name FILE:LINE).

examples:
  probekit report probes/modadd_grokked.toml --out out/demo
  probekit report probes/smollm2_relations.toml --out reports/relations --device cpu
"""


def _run(args: argparse.Namespace) -> int:
    from ..suites.check import check_suite_data
    from ..suites.spec import load_suite

    suite = load_suite(args.suite)
    check_suite_data(suite)  # FILE:LINE errors before any heavy import or model load
    if args.device is not None:
        from ..util.device import resolve_device

        resolve_device(args.device)  # a clear error for a bad or unavailable device
        suite = dataclasses.replace(suite, device=args.device)
    if args.check:
        print(f"{args.suite}: suite and data are valid")
        return 0
    if args.out is None:
        raise ConfigError("report needs --out DIR (where report.html and report.json go)")
    from ..suites.run import run_suite
    from .write import write_report

    result = run_suite(suite, progress=not args.quiet)
    paths = write_report(result, args.out)
    for entry in result.probes:
        for warning in entry.get("warnings", []):
            print(f"warning ({entry['kind']} probe for {entry['label']!r}): {warning}")
    for h in result.hypotheses:
        print(f"{h['name']} [{h['site']}]: {h['metric']}={h['statistic']:.3f}, "
              f"effect={h['effect_size']:+.3f}, p={h['p_value']:.3g} -> {h['verdict']}")
    print(f"wrote {paths['html']} and {paths['json']}")
    return 0


def add_report_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    parser = subparsers.add_parser(
        "report", parents=list(parents),
        help="run a probe suite (probes/*.toml) and write report.html + report.json",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("suite", help="probe suite TOML file, e.g. probes/modadd_grokked.toml")
    parser.add_argument("--out", help="output directory (required unless --check)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--device", default=None, help="override the suite's [suite] device (auto, cpu, cuda)"
    )
    parser.add_argument("--check", action="store_true",
                        help="only validate the suite and its data file, then exit")
    parser.set_defaults(func=_run)
    return parser
