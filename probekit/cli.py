"""``probekit`` command line. The library never reads ``sys.argv``; :func:`main` takes ``argv``.

Errors of probekit's own (:class:`probekit.errors.ProbekitError`) print as one line and exit 2;
anything else is a bug: its traceback is kept, with a line asking for a report (exit 1).
``--debug`` shows tracebacks always and every dependency warning. Heavy modules (torch,
transformers, scikit-learn) are imported only inside the commands, so ``--help`` and
``probekit models`` answer at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .capture_options import CaptureOptions, ShardOptions
from .errors import ConfigError, DataError, ProbekitError
from .executor_cli import add_executor_arguments
from .util.cli_options import add_config_flags, config_from_flags

log = logging.getLogger("probekit")

BUG_REPORT = (
    "This is a bug in probekit, not in your input: please report it with the command and the "
    "traceback above (rerun with --debug for more detail)."
)


class CliError(ConfigError):
    """A user error on the command line: printed as one line, exit status 2."""


#: the capture options that are ``probekit capture`` flags (generated from ``CaptureOptions``)
CAPTURE_FLAGS = ("batch_size", "padding_side", "dtype")
#: ... and from ``ShardOptions``
SHARD_FLAGS = ("examples_per_shard",)


def _capture_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """Everything about a capture that can be checked without a model (FILE:LINE errors)."""
    from .inputs import (
        POSITION_KEYWORDS,
        peek_model_limits,
        position_column,
        position_spec_error,
        prompt_column,
        read_jsonl,
        require_columns,
        token_ids,
    )
    from .util.outdir import check_out_dir

    check_out_dir(args.out, command="capture", inputs=[args.data], force=args.force,
                  legacy=_legacy_store)
    if args.repair and not (Path(args.out) / "manifest.json").is_file():
        raise CliError(f"--repair: {args.out} holds no activation store (no manifest.json); "
                       "drop --repair to capture a new store, or give the store's folder")
    config_from_flags(args, CaptureOptions, CAPTURE_FLAGS)  # the declared rules, named by flag
    config_from_flags(args, ShardOptions, SHARD_FLAGS)
    if args.shards_per_task < 1:
        raise CliError(f"--shards-per-task {args.shards_per_task}: must be >= 1")
    if args.examples_per_shard % args.batch_size:
        rounded = -(-args.examples_per_shard // args.batch_size) * args.batch_size
        log.warning("--examples-per-shard %d is rounded up to %d, a whole number of batches of "
                    "--batch-size %d; give a multiple of --batch-size to silence this",
                    args.examples_per_shard, rounded, args.batch_size)
    rows = read_jsonl(args.data)
    for row in rows:
        prompt_column(row)  # tokens or text, not both
    meta_keys = sorted({k for r in rows for k in r.data} - {"tokens", "text"})
    rows, dropped = require_columns(
        rows, meta_keys, drop=args.drop_incomplete, flag="--drop-incomplete"
    )
    if dropped:
        log.warning(
            "dropped %d of %d rows that lack a column (first: %s)",
            len(dropped), len(rows) + len(dropped), dropped[0].where,
        )
    spec = args.positions
    positions: list[int] | None = None
    if spec not in POSITION_KEYWORDS:
        name = spec.removeprefix("column:")
        if name not in meta_keys:
            raise position_spec_error(spec, meta_keys)
        positions = position_column(rows, name)
        spec = f"column:{name}"
    tokens = [token_ids(r) if "tokens" in r.data else None for r in rows]
    limits = peek_model_limits(args.model)
    _check_token_limits(rows, tokens, positions, spec, limits)
    sites = None
    if args.sites != "all":
        from .sites import Site

        try:
            sites = [Site.parse(s.strip()) for s in args.sites.split(",")]
        except (ValueError, KeyError) as err:
            raise CliError(f"--sites {args.sites!r}: {err.args[0] if err.args else err}") from None
        from .util.list_option import check_list_option

        check_list_option("--sites", [s.short for s in sites], what="site")  # each site once
    return {"rows": rows, "tokens": tokens, "positions": positions, "spec": spec,
            "meta_keys": meta_keys, "sites": sites, "limits": limits}


def _legacy_store(out: Path) -> dict[str, Any] | None:
    """An activation store (``manifest.json``, shard files) is probekit's own capture output."""
    if (out / "manifest.json").is_file() or any(out.glob("shard-*.safetensors")):
        return {"command": "capture", "name": None}
    return None


def _check_token_limits(
    rows: Sequence[Any],
    tokens: Sequence[list[int] | None],
    positions: Sequence[int] | None,
    spec: str,
    limits: dict[str, int],
) -> None:
    """Token ids below the vocab size, lengths within the context, positions inside examples."""
    from .inputs import check_positions, check_vocab

    known = [(r.at("tokens" if "tokens" in r.data else "text"), t) for r, t in zip(rows, tokens)
             if t is not None]
    where = [w for w, _ in known]
    seqs = [t for _, t in known]
    if "d_vocab" in limits:
        check_vocab(seqs, limits["d_vocab"], where)
    if "n_ctx" in limits:
        for loc, seq in known:
            if len(seq) > limits["n_ctx"]:
                raise DataError(
                    f"{loc}: {len(seq)} tokens but the model's context is {limits['n_ctx']}; "
                    "shorten the example"
                )
    if positions is not None:
        pos = [p for p, t in zip(positions, tokens) if t is not None]
        column = spec.removeprefix("column:")
        at = [r.at(column) for r, t in zip(rows, tokens) if t is not None]
        check_positions(pos, [len(s) for s in seqs], at, column)


def _cmd_capture(args: argparse.Namespace) -> int:
    from .capture import all_layers, capture_sharded, capture_to_store
    from .capture.positions import AllTokens, LastToken, TokenIndex
    from .executor_cli import executor_from_args
    from .inputs import tokenize_text
    from .models.cached import load_model_cached
    from .models.loading import load_model

    inputs = _capture_inputs(args)  # before the model loads: a typo fails in milliseconds
    rows = inputs["rows"]
    executor = executor_from_args(args, progress=not args.quiet)
    # with an executor the sharded capture below reuses this load (load_model_cached)
    model = load_model(args.model) if executor is None else load_model_cached(args.model)[0]
    tokens: list[list[int]] = []
    for row, ids in zip(rows, inputs["tokens"]):
        if ids is not None:
            tokens.append(ids)
            continue
        tokens.append(tokenize_text(model, row.data["text"], prepend_bos=args.prepend_bos,
                                    where=row.at("text")))
    limits = {"d_vocab": int(model.cfg.d_vocab), "n_ctx": int(model.cfg.n_ctx)}
    _check_token_limits(rows, tokens, inputs["positions"], inputs["spec"], limits)
    sites = inputs["sites"] or list(all_layers(model, args.kind))
    metadata: dict[str, list[Any]] = {k: [r.data.get(k) for r in rows] for k in inputs["meta_keys"]}
    if all("text" in r.data for r in rows) and "text" not in metadata:
        metadata["text"] = [r.data["text"] for r in rows]
    spec = inputs["spec"]
    positions = (
        LastToken() if spec == "last" else AllTokens() if spec == "all"
        else TokenIndex(inputs["positions"])
    )
    options = dict(
        metadata=metadata, positions=positions, batch_size=args.batch_size,
        padding_side=args.padding_side, dtype=args.dtype,
        examples_per_shard=args.examples_per_shard, repair=args.repair, progress=not args.quiet,
    )
    if executor is None:
        store = capture_to_store(model, tokens, args.out, sites, **options)
    else:
        store = capture_sharded(args.model, tokens, args.out, sites, executor=executor,
                                shards_per_task=args.shards_per_task, **options)
    print(f"wrote {store.n_rows} rows x {len(store.sites)} sites to {args.out}")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from .models.named import list_models

    for name, description in list_models().items():
        print(f"{name:16s} {description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``probekit`` parser with every subcommand (cheap: imports no heavy module)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks and every dependency warning")
    parser = argparse.ArgumentParser(
        prog="probekit",
        description="Mechanistic interpretability of generalization: capture activations, "
        "train testbeds, fit probes, write reports.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cap = sub.add_parser(
        "capture", parents=[common],
        help="capture activations of a model into an activation store",
        description="Capture activations into a sharded store. Rerunning the same command "
        "resumes an interrupted capture; --repair re-captures shards that fail their checksum.",
    )
    cap.add_argument("model", help="named model (see `probekit models`), checkpoint dir or HF dir")
    cap.add_argument("data", help="JSONL: one example per line with 'tokens' (ids) or 'text'; "
                     "other keys become metadata columns (text and token ids are kept too)")
    cap.add_argument("--out", required=True, help="store directory (resumes if interrupted)")
    cap.add_argument("--sites", default="all", help="'all' or comma list like resid_post@3,mlp_post@1")
    cap.add_argument("--kind", default="resid_post", help="site kind used with --sites all")
    cap.add_argument("--positions", default="last",
                     help="'last' (last token), 'all' (every token) or 'column:NAME' (an integer "
                     "column holding the token index; a bare NAME works too)")
    add_config_flags(cap, CaptureOptions, CAPTURE_FLAGS)
    add_config_flags(cap, ShardOptions, SHARD_FLAGS)
    cap.add_argument("--prepend-bos", action="store_true", help="prepend BOS when tokenizing 'text'")
    cap.add_argument("--drop-incomplete", action="store_true",
                     help="drop rows that lack a column other rows have (default: error)")
    cap.add_argument("--repair", action="store_true",
                     help="re-capture only the shards of --out that fail their checksum")
    cap.add_argument("--quiet", action="store_true", help="no progress bar")
    cap.add_argument("--force", action="store_true",
                     help="write into a non-empty --out that holds no store (default: refused)")
    add_executor_arguments(cap)
    cap.add_argument("--shards-per-task", type=int, default=1,
                     help="with --executor: consecutive shards per task (each task loads the "
                     "model once and writes its shards; the manifest is merged at the end)")
    cap.set_defaults(func=_cmd_capture)

    models = sub.add_parser("models", parents=[common], help="list the named offline models")
    models.set_defaults(func=_cmd_models)

    demo = sub.add_parser(
        "demo", parents=[common],
        help="run the README demo (the shipped modadd_grokked suite) from any directory",
        description="Run the shipped suite modadd_grokked (a grokked modular-addition "
        "transformer, its checkpoint embedded in probekit) and write report.html and "
        "report.json: the same as `probekit report probes/modadd_grokked.toml --out out/demo` "
        "in a clone, from any directory.",
    )
    demo.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.add_argument("--device", default=None, help="override the suite's device (auto, cpu, cuda)")
    demo.add_argument("--force", action="store_true",
                      help="write into a non-empty --out that probekit did not write (default: refused)")
    demo.set_defaults(func=_cmd_demo)

    ex = sub.add_parser(
        "examples", parents=[common], help="list the shipped suites and claim files, or copy them",
        description="The suites (probes/), diagnosis files and claim files (circuits/) shipped "
        "with probekit, with their data and checkpoints. `copy` writes editable copies in the "
        "repository's layout (DIR/probes/NAME.toml beside DIR/probes/checkpoints/...), so they "
        "run where they land: cd DIR; probekit report probes/NAME.toml --out out/NAME.",
    )
    ex_sub = ex.add_subparsers(dest="action", required=True, metavar="ACTION")
    ex_list = ex_sub.add_parser("list", parents=[common], help="name and describe every example")
    ex_list.set_defaults(func=_cmd_examples_list)
    ex_copy = ex_sub.add_parser(
        "copy", parents=[common], help="copy examples and the files they name into DIR",
        description="Copy examples (or `all`) with the data and checkpoints they name into DIR. "
        "Existing files are never replaced: identical ones are kept, and any other file in the "
        "way stops the copy before anything is written.",
    )
    ex_copy.add_argument("names", nargs="+", metavar="NAME",
                         help="example names from `probekit examples list`, or `all`")
    ex_copy.add_argument("dir", metavar="DIR", help="destination folder (created if missing)")
    ex_copy.set_defaults(func=_cmd_examples_copy)

    for register in _plugin_registrars():
        register(sub, parents=[common])
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    """``probekit demo``: ``probekit report`` on the packaged modadd_grokked suite."""
    from .examples import DEMO, example_path

    with example_path(DEMO) as suite:
        argv = ["report", str(suite), "--out", str(args.out)]
        argv += ["--quiet"] * bool(args.quiet)
        argv += ["--device", args.device] if args.device is not None else []
        argv += ["--force"] * bool(args.force)
        report_args = build_parser().parse_args(argv)
        status = int(report_args.func(report_args) or 0)
    print(f"open {Path(args.out) / 'report.html'}")
    return status


def _cmd_examples_list(args: argparse.Namespace) -> int:
    from .examples import list_examples

    examples = list_examples()
    width = max((len(e.name) for e in examples), default=0)
    for example in examples:
        print(f"{example.name:<{width}}  {example.command:<8}  {example.description}")
    print(f"\n{len(examples)} examples; `probekit examples copy NAME|all DIR` writes editable "
          "copies with their data and checkpoints")
    return 0


def _cmd_examples_copy(args: argparse.Namespace) -> int:
    from .examples import check_destination, copy_examples
    from .util.outdir import check_writable

    check_destination(args.dir)  # empty, a symbolic link or a file: one line, before any write
    check_writable(args.dir, flag="examples copy DIR")  # a file or a read-only place: one line
    result = copy_examples(args.names, args.dir)
    kept = f" ({len(result.unchanged)} identical files already there kept)" if result.unchanged else ""
    print(f"wrote {len(result.written)} files into {args.dir}{kept}")
    for example in result.examples:
        print(f"  {example.relpath}")
    first = result.examples[0]
    print(f"run one: cd {args.dir} && probekit {first.command} {first.relpath} "
          f"--out out/{first.name}")
    return 0


def _plugin_registrars() -> list[Any]:
    """Subcommands contributed by other modules (train, report, test, patch, diagnose)."""
    from .diagnosis.cli import add_diagnose_parser
    from .hypotheses.cli import add_test_parser
    from .suites.cli import add_report_parser
    from .suites.patch_cli import add_patch_parser
    from .train.cli import add_train_parser

    return [add_train_parser, add_report_parser, add_test_parser, add_patch_parser,
            add_diagnose_parser]


def _package_of(filename: str) -> str:
    """The top-level package a warning came from (``transformers``, ``torch``...)."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1:]
            return rest[0].removesuffix(".py") if rest else "?"
    here = Path(__file__).parent
    return "probekit" if Path(filename).is_relative_to(here) else Path(filename).stem


#: Dependency warnings that change what a result means: shown like probekit's own, never
#: counted among the hidden ones (a class with fewer members than CV folds, a solver that did
#: not converge, a score undefined for a single class).
MEANINGFUL_WARNINGS = (
    "least populated class",
    "failed to converge",
    "ConvergenceWarning",
    "Only one class present",
    "is ill-defined",
    "number of unique classes is greater than 50% of the number of samples",
)


def _meaningful(w: warnings.WarningMessage) -> bool:
    text = f"{w.category.__name__}: {w.message}"
    return any(marker in text for marker in MEANINGFUL_WARNINGS)


@contextmanager
def _summarised_warnings(debug: bool) -> Iterator[None]:
    """Show probekit's own warnings (and meaning-changing dependency ones) at once; count the rest.

    Shown warnings print when they happen, so they precede the command's final "wrote ..."
    line; the count of hidden dependency warnings prints at the end.
    """
    if debug:
        yield
        return
    counts: Counter[str] = Counter()

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        w = warnings.WarningMessage(message, category, filename, lineno)
        package = _package_of(filename)
        if package == "probekit":
            print(f"warning: {message}", file=sys.stderr)
        elif _meaningful(w):
            print(f"warning (from {package}): {message}", file=sys.stderr)
        else:
            counts[package] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        try:
            yield
        finally:
            if counts:
                listed = ", ".join(f"{n} from {p}" for p, n in counts.most_common())
                print(f"probekit: {sum(counts.values())} warnings from dependencies ({listed}) "
                      "hidden; --debug shows them", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``probekit ARGS``; returns the exit status (0 ok, 2 user error, 1 bug)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False)) or os.environ.get("PROBEKIT_DEBUG") == "1"
    if not sys.stderr.isatty():  # dependency bars (Hugging Face) would fill logs with \r redraws
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("probekit: %(message)s"))
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    try:
        with _summarised_warnings(debug):
            if os.environ.get("PROBEKIT_CACHE"):
                from .util.cache import cache_root

                cache_root()  # a cache path that is a file: one line before any work
            return int(args.func(args) or 0)
    except ProbekitError as err:
        if debug:
            traceback.print_exc()
        message = " ".join((str(err.args[0]) if err.args else str(err)).split("\n"))
        print(f"probekit {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"probekit {args.command}: interrupted (rerun the same command to resume)",
              file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(f"probekit {args.command}: unexpected error. {BUG_REPORT}", file=sys.stderr)
        return 1
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


if __name__ == "__main__":
    raise SystemExit(main())
