"""``probekit`` command line. The library never reads ``sys.argv``; :func:`main` takes ``argv``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .capture.positions import parse_position_rule


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CliError(f"data file {path} not found")
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise CliError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
    if not rows:
        raise CliError(f"data file {path} holds no examples")
    return rows


def _cmd_capture(args: argparse.Namespace) -> int:
    from .capture import Site, all_layers, capture_to_store
    from .models.loading import load_model

    model = load_model(args.model)
    rows = _read_jsonl(Path(args.data))
    tokens: list[list[int]] = []
    for i, row in enumerate(rows):
        if "tokens" in row:
            tokens.append([int(t) for t in row["tokens"]])
        elif "text" in row:
            if getattr(model, "tokenizer", None) is None:
                raise CliError(f"example {i} has 'text' but the model has no tokenizer; give 'tokens'")
            tokens.append(model.to_tokens(row["text"], prepend_bos=args.prepend_bos)[0].tolist())
        else:
            raise CliError(f"example {i} of {args.data} has neither 'tokens' nor 'text'")
    if args.sites == "all":
        sites = list(all_layers(model, args.kind))
    else:
        sites = [Site.parse(s) for s in args.sites.split(",")]
    meta_keys = sorted({k for r in rows for k in r} - {"tokens", "text"})
    metadata = {k: [r.get(k) for r in rows] for k in meta_keys}
    spec = args.positions  # a bare key name means "column:KEY"
    if spec not in ("last", "all") and not spec.startswith("column:"):
        spec = f"column:{spec}"
    positions = parse_position_rule(spec, metadata)
    store = capture_to_store(
        model, tokens, args.out, sites, metadata=metadata, positions=positions,
        batch_size=args.batch_size, padding_side=args.padding_side, dtype=args.dtype,
    )
    print(f"wrote {store.n_rows} rows x {len(store.sites)} sites to {args.out}")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from .models.loading import list_models

    for name, description in list_models().items():
        print(f"{name:16s} {description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="probekit",
        description="Mechanistic interpretability of generalization: capture activations, "
        "train testbeds, fit probes, write reports.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cap = sub.add_parser("capture", help="capture activations of a model into an activation store")
    cap.add_argument("model", help="named model (see `probekit models`), checkpoint dir or HF dir")
    cap.add_argument("data", help="JSONL: one example per line with 'tokens' (ids) or 'text'; "
                     "other keys become metadata columns")
    cap.add_argument("--out", required=True, help="store directory (resumes if interrupted)")
    cap.add_argument("--sites", default="all", help="'all' or comma list like resid_post@3,mlp_post@1")
    cap.add_argument("--kind", default="resid_post", help="site kind used with --sites all")
    cap.add_argument("--positions", default="last",
                     help="'last', 'all', or the name of an integer key holding the token index")
    cap.add_argument("--batch-size", type=int, default=32)
    cap.add_argument("--padding-side", choices=["left", "right"], default="right")
    cap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    cap.add_argument("--prepend-bos", action="store_true", help="prepend BOS when tokenizing 'text'")
    cap.set_defaults(func=_cmd_capture)

    models = sub.add_parser("models", help="list the named offline models")
    models.set_defaults(func=_cmd_models)

    for register in _plugin_registrars():
        register(sub)
    return parser


def _plugin_registrars() -> list[Any]:
    """Subcommands contributed by other modules (train, report), if present."""
    registrars = []
    for module, attr in (
        ("probekit.train.cli", "add_train_parser"),
        ("probekit.report.cli", "add_report_parser"),
    ):
        try:
            mod = __import__(module, fromlist=[attr])
        except ImportError:
            continue
        registrars.append(getattr(mod, attr))
    return registrars


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, ValueError, KeyError, FileNotFoundError, IndexError) as err:  # one clear line
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"probekit {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
