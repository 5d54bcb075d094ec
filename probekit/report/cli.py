"""``probekit report SUITE.toml --out DIR``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..suites import load_suite, run_suite
    from .write import write_report

    suite = load_suite(args.suite)
    if args.device is not None:
        from ..util.device import resolve_device

        resolve_device(args.device)  # a clear error for a bad or unavailable device
        suite = dataclasses.replace(suite, device=args.device)
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


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report", help="run a probe suite (probes/*.toml) and write report.html + report.json"
    )
    parser.add_argument("suite", help="probe suite TOML file, e.g. probes/modadd_operands.toml")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--device", default=None, help="override the suite's [suite] device (auto, cpu, cuda)"
    )
    parser.set_defaults(func=_run)
    return parser
