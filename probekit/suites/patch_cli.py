"""``probekit patch MODEL DATA --out DIR``: patching heatmaps of prompt pairs, as HTML + JSON.

The data file holds one prompt per line (``text`` or ``tokens``) with a pair id, a role
(``clean`` / ``corrupt``) and an answer. Everything that can be checked without the model
(columns, pairing, token lengths of token rows, the options) is checked first, with
``FILE:LINE`` errors; the grids are the ``[[patching]]`` suite analysis
(:mod:`probekit.suites.analyses.patching`), so a suite and this command give the same numbers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HELP = """\
Patch every (layer, position) / (layer, head) cell of clean-corrupt prompt pairs and write
report.html (heatmaps: layer x position labelled with the prompt's tokens, layer x head) and
report.json (every grid's numbers).

DATA is JSONL, one prompt a line: "text" (or "tokens": ids), "pair_id", "role" ("clean" or
"corrupt") and "answer" (one token: text or a token id; the metric is logit(clean answer) -
logit(corrupt answer) at the last token; --answer-tokens first scores a multi-token answer by
its first token). Clean and corrupt prompts of a pair need the same
number of tokens.

examples:
  probekit patch smollm2-135m circuits/data/capital_pairs.jsonl --answer-tokens first --out out/patch
  probekit patch runs/kg/checkpoints/step_0004000 pairs.jsonl --kinds resid_post,attn_z --method both --out out/kg
"""

_METHOD_WORDS = {"both": "activation and attribution"}  # how the report names --method


#: the ``[[patching]]`` keys that are ``probekit patch`` flags (generated from ``PatchingSpec``)
PATCH_FLAGS = ("kinds", "method", "metric", "direction", "layers", "window", "head_grid", "edges",
               "edge_ks", "edge_top", "answer_column", "answer_tokens", "pair_column",
               "role_column", "batch_size")


def _list_flags() -> dict[str, Any]:
    from ..util.cli_options import ListFlag

    return {"layers": ListFlag("block index", "block indices like 0,1,2"),
            "edge_ks": ListFlag("circuit size", "circuit sizes like 10,100,1000"),
            "kinds": ListFlag("kind", "site kinds like resid_pre,attn_z")}


def _spec(args: argparse.Namespace) -> Any:
    from ..errors import ConfigError as CliError
    from ..util.cli_options import config_from_flags
    from .patch_spec import PatchingSpec

    try:
        return config_from_flags(args, PatchingSpec, PATCH_FLAGS, lists=_list_flags())
    except CliError:
        raise
    except ValueError as err:
        raise CliError(f"--kinds/--window/--edge-ks/--batch-size: {err}") from None


def _pairs(rows: list[Any], spec: Any) -> tuple[list[Any], list[Any]]:
    """Clean and corrupt rows in pair order; FILE:LINE errors for a broken pairing."""
    from ..errors import DataError
    from ..inputs import check_scalar_column, is_missing

    check_scalar_column(rows, spec.pair_column, what="a pair id")
    by_pair: dict[Any, dict[str, Any]] = {}
    for row in rows:
        for col in (spec.pair_column, spec.role_column, spec.answer_column):
            if is_missing(row.data.get(col)):
                what = "has no" if col not in row.data else "has a null or NaN value in its"
                raise DataError(f"{row.at(col)}: row {what} {col!r} column; every row needs "
                                f"{spec.pair_column!r}, {spec.role_column!r} and {spec.answer_column!r}")
        role = row.data[spec.role_column]
        if role not in ("clean", "corrupt"):
            raise DataError(f"{row.at(spec.role_column)}: {spec.role_column}={role!r}; expected 'clean' or 'corrupt'")
        slot = by_pair.setdefault(str(row.data[spec.pair_column]), {})
        if role in slot:
            raise DataError(f"{row.at(spec.role_column)}: a second {role!r} row for {spec.pair_column} "
                            f"{row.data[spec.pair_column]!r} (first at {slot[role].where})")
        slot[role] = row
    for pid, slot in by_pair.items():
        if len(slot) != 2:
            have = next(iter(slot.values()))
            missing = "corrupt" if "clean" in slot else "clean"
            raise DataError(f"{have.where}: {spec.pair_column} {pid!r} has no {missing!r} row; "
                            "give every pair one clean and one corrupt prompt")
    return [s["clean"] for s in by_pair.values()], [s["corrupt"] for s in by_pair.values()]


def _check_lengths(clean_rows: list[Any], clean: list[list[int]], corrupt_rows: list[Any],
                   corrupt: list[list[int]]) -> None:
    from ..errors import DataError

    for cr, c, rr, r in zip(clean_rows, clean, corrupt_rows, corrupt):
        if len(c) != len(r):
            raise DataError(
                f"{rr.where}: corrupt prompt has {len(r)} tokens but its clean prompt "
                f"({cr.where}) has {len(c)}; a position grid needs equal lengths: rephrase one"
            )


def _vocab(model_arg: str) -> Any:
    """The testbed vocabulary recorded in a probekit checkpoint's config.json (None otherwise)."""
    import json

    from ..testbeds.base import Vocab
    from ..textfile import read_text

    path = Path(model_arg).expanduser() / "config.json"
    try:
        config = json.loads(read_text(path))
        vocab = config["extra"]["vocab"]
        return Vocab(tokens=tuple(vocab["tokens"]), pad=vocab["pad"])
    except (OSError, ValueError, KeyError, TypeError):  # a named model or a Hugging Face dir
        return None


def _check_limits(rows: list[Any], seqs: list[list[int]], limits: dict[str, int]) -> None:
    """Token ids inside the vocabulary and prompts within the context (``FILE:LINE`` errors)."""
    from ..errors import DataError
    from ..inputs import check_vocab

    if "d_vocab" in limits:
        check_vocab(seqs, limits["d_vocab"], [_prompt_at(r) for r in rows])
    for row, seq in zip(rows, seqs):
        if "n_ctx" in limits and len(seq) > limits["n_ctx"]:
            raise DataError(f"{_prompt_at(row)}: {len(seq)} tokens but the model's context is "
                            f"{limits['n_ctx']}; shorten the prompt")


def _prompt_at(row: Any) -> str:
    """``FILE:LINE:COLUMN`` of the row's prompt (its ``tokens`` or ``text`` value)."""
    return row.at("tokens" if "tokens" in row.data else "text")


def _check_blocks(spec: Any, limits: dict[str, int]) -> None:
    """``--layers`` and ``--window`` against the model's blocks (``config.json``), before it loads.

    The rules :func:`probekit.circuits.patch_grid.prepare_grid` applies once the model is loaded.
    """
    if "n_layers" not in limits:
        return
    from ..circuits.patch_grid import check_window
    from ..util.list_option import check_list_option

    n = limits["n_layers"]
    check_list_option("--layers", list(spec.layers), low=0, high=n, what="block index",
                      note=f"the model has {n} blocks")
    check_window(spec.window, n)


def _run(args: argparse.Namespace) -> int:
    import time
    from datetime import UTC, datetime

    from ..errors import DataError
    from ..inputs import peek_model_limits, prompt_column, read_jsonl, token_ids, tokenize_text

    start = time.perf_counter()
    spec = _spec(args)  # option errors before reading data
    rows = read_jsonl(args.data)
    for row in rows:
        prompt_column(row)  # tokens or text, not both
    clean_rows, corrupt_rows = _pairs(rows, spec)
    ids = {id(r): token_ids(r) for r in rows if "tokens" in r.data}
    known = [r for r in rows if id(r) in ids]
    limits = peek_model_limits(args.model)
    _check_limits(known, [ids[id(r)] for r in known], limits)
    _check_blocks(spec, limits)
    if all(id(r) in ids for r in rows):
        _check_lengths(clean_rows, [ids[id(r)] for r in clean_rows], corrupt_rows,
                       [ids[id(r)] for r in corrupt_rows])

    from ..circuits import answer_token, answer_token_ids
    from ..fingerprint import model_fingerprint
    from ..models.loading import load_model
    from ..report.write import write_report
    from ..util.device import resolve_device
    from ..util.io import sha256_file
    from .analyses.patching import patching_grids

    model = load_model(args.model, device=resolve_device(args.device))
    vocab = _vocab(args.model)

    def tokens(row: Any) -> list[int]:
        if id(row) in ids:
            return ids[id(row)]
        return tokenize_text(model, row.data["text"], prepend_bos=args.prepend_bos, where=row.at("text"))

    clean, corrupt = [tokens(r) for r in clean_rows], [tokens(r) for r in corrupt_rows]
    _check_lengths(clean_rows, clean, corrupt_rows, corrupt)
    limits = {"d_vocab": int(model.cfg.d_vocab), "n_ctx": int(model.cfg.n_ctx)}
    _check_limits(clean_rows + corrupt_rows, clean + corrupt, limits)

    def answer(row: Any) -> int:
        try:
            tok = answer_token(model, row.data[spec.answer_column], vocab,
                               answer_tokens=spec.answer_tokens, where=row.at(spec.answer_column))
        except DataError:
            raise
        except Exception as err:
            raise DataError(f"{row.at(spec.answer_column)}: answer {row.data[spec.answer_column]!r}: {err}") from None
        if not 0 <= tok < limits["d_vocab"]:
            raise DataError(f"{row.at(spec.answer_column)}: answer token id {tok} is outside the model's vocabulary "
                            f"(0..{limits['d_vocab'] - 1})")
        return tok

    answers, foils = [answer(r) for r in clean_rows], [answer(r) for r in corrupt_rows]
    reduced = []
    if spec.answer_tokens == "first":
        reduced = [f"{r.at(spec.answer_column)}: {r.data[spec.answer_column]!r}" for r in clean_rows + corrupt_rows
                   if len(answer_token_ids(model, r.data[spec.answer_column], vocab)) > 1]
    result = patching_grids(model, clean, corrupt, spec, answer=answers, foil=foils, vocab=vocab,
                            reduced=reduced)
    report = {
        "suite": {"name": f"patch {Path(args.data).name}",
                  "description": f"{_METHOD_WORDS.get(spec.method, spec.method)} patching of "
                  f"{', '.join(spec.kinds)} "
                  f"({spec.direction}, metric {spec.metric}) on {len(clean)} prompt pairs",
                  "command": "patch", "model": args.model, "data": str(args.data),
                  "patching": {k: list(v) if isinstance(v, tuple) else v
                               for k, v in vars(spec).items()}},
        "model": {"id": str(getattr(model, "probekit_source", "") or args.model),
                  "fingerprint": model_fingerprint(model), "n_layers": int(model.cfg.n_layers),
                  "d_model": int(model.cfg.d_model),
                  "compatibility_mode": bool(getattr(model, "probekit_compatibility_mode", False))},
        "data": {"n_examples": len(rows), "splits": {"pairs": len(clean)}, "positions": "all",
                 "probe_device": args.device,
                 "source": {"file": str(args.data), "sha256": sha256_file(Path(args.data))}},
        "provenance": {"timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
                       "run_seconds": round(time.perf_counter() - start, 2)},
        "hypotheses": [],
        "analyses": [result.to_dict()],
    }
    paths = write_report(report, args.out)
    for warning in result.warnings:
        print(f"warning: {warning}")
    for row in result.blocks[1].rows:
        print(f"{row['kind']} ({row['method']}): largest normalised effect "
              f"{row['effect']:+.3f} at {row['cell']}")
    for kind, r in result.data["correlation"].items():
        print(f"{kind}: attribution vs activation patching r = {r:.3f}")
    if "edges" in result.data:
        edges = result.data["edges"]
        curve = edges["faithfulness"]
        print(f"{edges['method']}: top edge {edges['top'][0][0]} -> {edges['top'][0][1]} "
              f"({edges['top'][0][2]:+.4g}); top-k circuits recover " + ", ".join(
                  f"{v:.2f} (k={k})" for k, v in zip(curve["ks"], curve["normalized"])))
    print(f"wrote {paths['html']} and {paths['json']}")
    return 0


def add_patch_parser(subparsers: Any, parents: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Add the ``patch`` subcommand to an argparse ``subparsers``; handler in ``func``."""
    parser = subparsers.add_parser(
        "patch", parents=list(parents),
        help="activation / attribution patching of prompt pairs: heatmaps in report.html + json",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="named model (see `probekit models`), checkpoint dir or HF dir")
    parser.add_argument("data", help="JSONL prompt pairs (text/tokens, pair_id, role, answer)")
    parser.add_argument("--out", required=True, help="output directory for report.html + report.json")
    from ..util.cli_options import add_config_flags
    from .patch_spec import PatchingSpec

    add_config_flags(parser, PatchingSpec, PATCH_FLAGS)
    parser.add_argument("--prepend-bos", action="store_true", help="prepend BOS when tokenizing 'text'")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out that probekit did not write, or "
                        "replace another command's report there (default: refused)")
    parser.set_defaults(func=_quiet_or_not)
    return parser


def _quiet_or_not(args: argparse.Namespace) -> int:
    from ..progress import progress_settings
    from ..util.outdir import claim_out_dir, report_owner

    # --out checked (a file, the data file, read-only, another command's output, the user's own
    # files) and locked before the data are read or the model loaded; a failed run leaves no folder
    owner = {"command": "patch", "name": f"patch {Path(args.data).name}", "inputs": [args.data],
             "force": args.force, "legacy": report_owner("patch")}
    with progress_settings(enabled=not args.quiet), claim_out_dir(args.out, **owner):
        return _run(args)
