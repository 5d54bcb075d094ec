"""``probekit test FILE.toml [...]``: run hypothesis files; exit 0 iff every claim passes.

Exit status: 0 all PASS, 1 any FAIL or INCONCLUSIVE, 2 a spec error (one line, from the
top-level CLI). Every file is validated before any model loads.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HELP = """\
Run hypothesis files (circuits/*.toml): one line per claim (PASS / FAIL / INCONCLUSIVE with the
effect, its CI, p-values and n), report.html + report.json in --out.
Exit status: 0 if every claim passes, 1 on any FAIL or INCONCLUSIVE, 2 on a spec error.

examples:
  probekit test circuits/modadd_fourier.toml --out out/modadd
  probekit test circuits/*.toml --out out/claims     # one subfolder per file
  probekit test circuits/modadd_fourier.toml --executor ray --ray-address auto
  probekit test --list-kinds                         # built-in and plug-in measurement kinds
  probekit test --list-kinds docs/examples/plugin/claims.toml   # with that file's [plugins]
"""


def _list_kinds(files: Sequence[str]) -> int:
    """Print every measurement kind with its origin (the files' ``[plugins]`` loaded first)."""
    from .plugins import kind_origins, load_file_plugins

    for path in files:
        load_file_plugins(path)
    for origin in kind_origins():
        print(origin.line())
    from .registry import MEASUREMENT_KINDS

    for error in MEASUREMENT_KINDS.broken():  # listed, not raised: they stop no other file
        print(f"not loaded: {error}")
    return 0



def _run(args: argparse.Namespace) -> int:
    import dataclasses

    from ..errors import ConfigError
    from ..suites.check import check_suite_data, check_suite_model
    from ..suites.cli import execution_from_args
    from ..util.outdir import check_out_dir, claim_out_dir, report_owner
    from .spec import load_hypotheses

    if args.list_kinds:
        return _list_kinds(args.files)
    if not args.files:
        raise ConfigError("probekit test needs at least one hypothesis file (or --list-kinds)")
    seen: dict[Path, str] = {}
    for path in args.files:  # one --out folder per file: the same file twice would overwrite itself
        key = Path(path).resolve()
        if key in seen:
            raise ConfigError(f"{path} is given twice (as {seen[key]!r} and {path!r}); give each "
                              "hypothesis file once")
        seen[key] = path
    stems = [Path(p).stem for p in args.files]
    if args.out is not None and len(args.files) > 1 and len(set(stems)) < len(stems):
        twice = sorted({s for s in stems if stems.count(s) > 1})
        raise ConfigError(f"files named {twice} would share the folder --out/{twice[0]}; rename "
                          "one or run them with different --out folders")
    outs: list[Path | None] = [None] * len(args.files)
    if args.out is not None:
        outs = [Path(args.out) if len(args.files) == 1 else Path(args.out) / Path(p).stem
                for p in args.files]
        for out in outs:  # a file, an input, a read-only or foreign folder: before anything
            check_out_dir(out, command="test", inputs=list(args.files), force=args.force,
                          legacy=report_owner("test"))
    files = [load_hypotheses(p) for p in args.files]  # every spec error before any model loads
    for i, spec in enumerate(files):
        rows = check_suite_data(spec.suite)
        check_suite_model(spec.suite, rows, claims=[(c.name, c.spec) for c in spec.claims])
        execution = execution_from_args(args, spec.suite)  # --executor / --executor-opt
        if execution != spec.suite.execution:
            files[i] = dataclasses.replace(
                spec, suite=dataclasses.replace(spec.suite, execution=execution))
    for spec, out in zip(files, outs):
        if out is not None:  # another claim file's report needs --force
            check_out_dir(out, command="test", name=spec.suite.name, inputs=list(args.files),
                          force=args.force, legacy=report_owner("test"))
    if args.check:
        for path in args.files:
            print(f"{path}: hypothesis file is valid")
        return 0
    from .runner import run

    ok = True
    for path, spec, out in zip(args.files, files, outs):
        executor = spec.suite.execution.make_executor(progress=not args.quiet)
        connect = getattr(executor, "connect", None)
        if connect is not None:
            connect()  # an unreachable cluster fails here, before the model loads
        if out is None:
            result = run(spec, progress=not args.quiet, executor=executor, out=None)
        else:
            with claim_out_dir(out, command="test", name=spec.suite.name, inputs=list(args.files),
                               force=args.force, legacy=report_owner("test")):
                result = run(spec, progress=not args.quiet, executor=executor, out=out)
        print(f"{path}:")
        for line in result.lines():
            print(f"  {line}")
        if out is not None:
            print(f"  wrote {out / 'report.html'} and {out / 'report.json'}")
        ok &= result.passed
    return 0 if ok else 1


def add_test_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``test`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    from ..executor_cli import add_executor_arguments

    parser = subparsers.add_parser(
        "test", parents=list(parents),
        help="check hypotheses about a model (circuits/*.toml): PASS / FAIL per claim",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="*", help="hypothesis TOML files")
    parser.add_argument("--out", help="output directory for report.html + report.json")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--check", action="store_true", help="only validate the files, then exit")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out that probekit did not write, or "
                        "replace another file's report there (default: refused)")
    parser.add_argument("--list-kinds", action="store_true",
                        help="list the measurement kinds (built-in, plug-in modules of the given "
                        "files' [plugins], entry points of group probekit.kinds) and exit")
    add_executor_arguments(parser)
    parser.set_defaults(func=_run)
    return parser
