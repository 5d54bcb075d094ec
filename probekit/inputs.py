"""Checks of user-supplied example files (JSONL), before any model is loaded.

Every error names ``FILE:LINE``, the column and the bad value, and says how to fix it:
``data.jsonl:7: column 'pos' holds 1.7; token positions must be integers``.
No torch import: these run in milliseconds, so a typo fails at once, not after a model load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DataError
from .textfile import read_text

POSITION_KEYWORDS = ("last", "all")


@dataclass(frozen=True)
class JsonlRow:
    """One example of a JSONL file: its parsed object, where it came from and where each value is.

    ``columns`` maps each top-level key to the 1-based column (in characters) where its value
    starts on the line; ``start`` is the column of the object's ``{``.
    """

    path: str
    line: int
    data: dict[str, Any]
    columns: dict[str, int] = field(default_factory=dict, compare=False)
    start: int = 1

    @property
    def where(self) -> str:
        """``FILE:LINE`` for messages about the row as a whole."""
        return f"{self.path}:{self.line}"

    def at(self, key: str) -> str:
        """``FILE:LINE:COLUMN`` of the value of ``key`` (of the object when the key is absent)."""
        return f"{self.path}:{self.line}:{self.columns.get(key, self.start)}"


def is_missing(value: Any) -> bool:
    """True for a value that stands for "no value": ``None`` (JSON ``null``) or a float NaN.

    JSON has no NaN, but Python's parser (and pandas' ``to_json`` of a missing value, as the
    ``NaN`` literal) lets it through; probekit treats it exactly like ``null`` everywhere, so a
    NaN label is never scored as a class ``"nan"``.
    """
    return value is None or (isinstance(value, float) and math.isnan(value))


def _infinity(token: str, line: str, where: str, columns: dict[str, int]) -> float:
    """``parse_constant`` hook: NaN parses (it is then missing); +-Infinity is an error.

    The column is the value's when the constant is a top-level value, else its first occurrence.
    """
    if token == "NaN":
        return math.nan
    cols = [c for c in columns.values() if line.startswith(token, c - 1)]
    col = cols[0] if cols else line.find(token) + 1
    raise DataError(
        f"{where}:{col}: {token} is not a number probekit can use (JSON has no infinities); "
        "write a finite number or null"
    )


def read_jsonl(path: str | Path) -> list[JsonlRow]:
    """Parse a JSONL file (one JSON object per non-blank line), keeping line numbers.

    ``NaN`` literals parse to float NaN (missing, as ``null``: :func:`is_missing`);
    ``Infinity`` literals and duplicate keys in an object are errors naming ``FILE:LINE:COLUMN``.

    Raises:
        DataError: missing or empty file, a line that is not JSON, or not a JSON object.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file {path} not found; pass a JSONL file (one JSON object a line)")
    rows: list[JsonlRow] = []
    for lineno, line in enumerate(_decoded_lines(path), 1):
        if not line.strip():
            continue
        rows.append(parse_jsonl_line(line, path=str(path), lineno=lineno))
    if not rows:
        raise DataError(f"data file {path} holds no examples")
    return rows


def _decoded_lines(path: Path) -> list[str]:
    """The file's lines as text (:func:`probekit.textfile.read_text`: byte-order marks, UTF-16)."""
    return [line.rstrip("\r") for line in read_text(path).split("\n")]


def parse_jsonl_line(line: str, *, path: str, lineno: int) -> JsonlRow:
    """One JSONL line as a :class:`JsonlRow`: the one parser of every JSONL file probekit reads.

    ``NaN`` parses to float NaN (missing, as ``null``); ``Infinity``, a key given twice and a
    syntax error are errors naming ``FILE:LINE:COLUMN`` (the decoder's column for a syntax error,
    the value's or key's column otherwise).

    Raises:
        DataError: the line is not one JSON object, or holds a value JSON allows but probekit
            cannot use unambiguously.
    """
    where = f"{path}:{lineno}"
    columns, start = _value_columns(line, where)
    try:
        data = json.loads(
            line,
            parse_constant=lambda token: _infinity(token, line, where, columns),
            object_pairs_hook=lambda pairs: _unique(pairs, line, where),
        )
    except json.JSONDecodeError as err:
        raise DataError(
            f"{where}:{err.colno}: not valid JSON ({err.msg}); each line must be one JSON object"
        ) from None
    if not isinstance(data, dict):
        raise DataError(
            f"{where}:{start}: expected a JSON object like {{\"text\": ...}}, got "
            f"{type(data).__name__} {_short(data)}"
        )
    return JsonlRow(path, lineno, data, columns, start)


def _value_columns(line: str, where: str) -> tuple[dict[str, int], int]:
    """1-based columns of the values of a line's top-level object keys, and of its ``{``.

    A scan with the stdlib's own scanners (``scanstring``, ``raw_decode``); on a line that is
    not one object it returns what it found so far (the full parse then reports the error).
    A top-level key given twice is an error naming its column.
    """
    decoder = json.JSONDecoder(parse_constant=lambda token: None)
    columns: dict[str, int] = {}
    i = len(line) - len(line.lstrip())
    start = i + 1
    if not line.startswith("{", i):
        return columns, start
    i += 1
    try:
        while True:
            i += len(line[i:]) - len(line[i:].lstrip())
            if line.startswith("}", i) or not line.startswith('"', i):
                break
            key_col = i + 1
            key, i = json.decoder.scanstring(line, i + 1)
            i += len(line[i:]) - len(line[i:].lstrip())
            if not line.startswith(":", i):
                break
            i += 1
            i += len(line[i:]) - len(line[i:].lstrip())
            if key in columns:
                raise DataError(
                    f"{where}:{key_col}: key {key!r} appears twice in one object (JSON "
                    "would silently keep the last value); give each column once"
                )
            columns[key] = i + 1
            _, i = decoder.raw_decode(line, i)
            i += len(line[i:]) - len(line[i:].lstrip())
            if not line.startswith(",", i):
                break
            i += 1
    except DataError:
        raise
    except (ValueError, IndexError):
        pass  # not one well-formed object: json.loads names the error and its column
    return columns, start


def _unique(pairs: list[tuple[str, Any]], line: str, where: str) -> dict[str, Any]:
    """``object_pairs_hook``: a key given twice in one object is an error (JSON keeps the last)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            first = line.find(json.dumps(key))
            col = line.find(json.dumps(key), first + 1) + 1
            raise DataError(
                f"{where}:{col}: key {key!r} appears twice in one object (JSON would silently "
                "keep the last value); give each column once"
            )
        seen.add(key)
    return dict(pairs)


def prompt_column(row: JsonlRow) -> str:
    """``"tokens"`` or ``"text"``: the row's prompt; refused when it has neither or both.

    Raises:
        DataError: ``FILE:LINE:COLUMN`` naming the row (neither) or its ``text`` value (both:
            probekit would have to pick one silently).
    """
    has = [c for c in ("tokens", "text") if not is_missing(row.data.get(c))]
    if not has:
        raise DataError(f"{row.at('tokens')}: row has neither 'tokens' (a list of ids) nor 'text'")
    if len(has) == 2:
        raise DataError(f"{row.at('text')}: row has both 'tokens' and 'text' (conflicting prompts); "
                        "give one of them")
    if has[0] == "text":
        check_text(row.data["text"], row.at("text"))
    return has[0]


def check_scalar_column(rows: Sequence[JsonlRow], column: str, *, what: str) -> None:
    """Raise naming ``FILE:LINE:COLUMN`` of the first value of ``column`` that is a list or object.

    A label or metadata value must be a string, number or boolean (missing values are the
    caller's business): ``[1, 2]`` as a class would be compared as text, silently.
    """
    for row in rows:
        value = row.data.get(column)
        if isinstance(value, (list, dict)):
            raise DataError(f"{row.at(column)}: column {column!r} holds {_short(value)}; expected "
                            f"{what} (a string, number or boolean)")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def as_int(value: Any, *, where: str, column: str, what: str = "an integer") -> int:
    """``value`` as an int; floats with a fraction, strings and booleans are refused.

    Raises:
        DataError: naming ``where`` (``FILE:LINE``), the column and the value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where}: column {column!r} holds {_short(value)}; expected {what}")
    if isinstance(value, float) and not value.is_integer():
        raise DataError(
            f"{where}: column {column!r} holds {value!r}, which is not a whole number; "
            f"expected {what}"
        )
    return int(value)


def token_ids(row: JsonlRow, column: str = "tokens") -> list[int]:
    """The list of token ids in ``row[column]``, each a non-negative integer."""
    value = row.data[column]
    if not isinstance(value, list):
        hint = " (put text in a 'text' column instead)" if isinstance(value, str) else ""
        raise DataError(
            f"{row.at(column)}: column {column!r} holds {_short(value)}; expected a list of integer "
            f"token ids like [1, 2, 3]{hint}"
        )
    if not value:
        raise DataError(f"{row.at(column)}: column {column!r} is an empty list; give >= 1 token id")
    ids = [as_int(v, where=row.at(column), column=column, what="integer token ids") for v in value]
    negative = [t for t in ids if t < 0]
    if negative:
        raise DataError(f"{row.at(column)}: column {column!r} holds negative token id {negative[0]}")
    return ids


def check_vocab(tokens: Sequence[Sequence[int]], vocab_size: int, where: Sequence[str]) -> None:
    """Raise naming the first example whose token id is ``>= vocab_size``.

    Args:
        tokens: token ids per example.
        vocab_size: the model's ``d_vocab``.
        where: a location per example (``FILE:LINE`` or ``example 3``).
    """
    for seq, loc in zip(tokens, where):
        bad = [t for t in seq if t >= vocab_size or t < 0]
        if bad:
            raise DataError(
                f"{loc}: token id {bad[0]} is outside the model's vocabulary (vocab size "
                f"{vocab_size}: valid ids are 0..{vocab_size - 1})"
            )


def check_text(value: Any, where: str, column: str = "text") -> str:
    """``value`` if it is a string; else a :class:`DataError` naming the row and the value.

    A number or a list in ``text`` would reach the tokenizer, which fails with its own
    ``ValueError`` (or tokenizes ``str(value)`` silently).
    """
    if not isinstance(value, str):
        hint = " (token ids go in a 'tokens' column)" if isinstance(value, list) else ""
        raise DataError(f"{where}: column {column!r} holds {type(value).__name__} {_short(value)}; "
                        f"expected a string{hint}")
    return value


def tokenize_text(model: Any, text: str, *, prepend_bos: bool | None, where: str) -> list[int]:
    """Token ids of ``text`` under ``model``'s tokenizer, never truncated.

    TransformerLens' ``to_tokens`` cuts a text longer than ``n_ctx`` by default, so the "last
    token" of an over-long prompt would silently be one from its middle; here the text is
    tokenized whole and a prompt longer than the context is an error.

    Args:
        model: a model with ``tokenizer``, ``to_tokens`` and ``cfg.n_ctx``.
        text: the prompt.
        prepend_bos: passed to ``to_tokens``.
        where: the row for messages (``FILE:LINE`` or ``example 3``).

    Raises:
        DataError: the model has no tokenizer, or the text is longer than the context.
    """
    check_text(text, where)
    if getattr(model, "tokenizer", None) is None:
        raise DataError(f"{where}: row has 'text' but the model has no tokenizer; give "
                        "'tokens' (a list of ids)")
    ids = model.to_tokens(text, prepend_bos=prepend_bos, truncate=False)[0].tolist()
    n_ctx = int(model.cfg.n_ctx)
    if len(ids) > n_ctx:
        raise DataError(
            f"{where}: 'text' is {len(ids)} tokens but the model's context is {n_ctx} tokens; "
            "shorten the text (probekit never truncates it: the last token would come from "
            "the middle of the prompt)"
        )
    return [int(t) for t in ids]


def require_columns(
    rows: Sequence[JsonlRow], columns: Sequence[str], *, drop: bool = False, flag: str = ""
) -> tuple[list[JsonlRow], list[JsonlRow]]:
    """Rows that have every column in ``columns`` (non-null), and the rows dropped.

    Args:
        rows: parsed examples.
        columns: keys each row must hold.
        drop: drop incomplete rows instead of raising.
        flag: how the user asks for ``drop`` (named in the message), e.g. ``--drop-incomplete``.

    Raises:
        DataError: naming the first incomplete row and the missing key (unless ``drop``).
    """
    kept: list[JsonlRow] = []
    dropped: list[JsonlRow] = []
    for row in rows:
        missing = [c for c in columns if is_missing(row.data.get(c))]
        if not missing:
            kept.append(row)
        elif drop:
            dropped.append(row)
        else:
            how = f", or pass {flag} to drop such rows" if flag else ""
            raise DataError(
                f"{row.at(missing[0])}: row lacks {missing[0]!r} (missing, null or NaN) that other rows "
                f"have; add it{how}"
            )
    if not kept:
        raise DataError(f"every row lacks one of {list(columns)}; nothing left to use")
    return kept, dropped


def position_column(rows: Sequence[JsonlRow], column: str) -> list[int]:
    """Integer token positions from ``column`` (checked per row, ``FILE:LINE`` in errors)."""
    return [
        as_int(r.data.get(column), where=r.at(column), column=column, what="an integer token position")
        for r in rows
    ]


def position_spec_error(spec: str, columns: Sequence[str]) -> DataError:
    """The error for an unknown ``--positions`` value, listing every valid form."""
    listed = ", ".join(f"'column:{c}'" for c in sorted(columns)) or "none in this file"
    return DataError(
        f"positions {spec!r}: use 'last' (last token), 'all' (every token) or 'column:NAME' "
        f"(an integer column holding the token index); columns here: {listed}"
    )


def check_positions(
    positions: Sequence[int], lengths: Sequence[int], where: Sequence[str], column: str
) -> None:
    """Raise naming the first example whose position is outside its token sequence."""
    for pos, n, loc in zip(positions, lengths, where):
        if not -n <= pos < n:
            raise DataError(
                f"{loc}: column {column!r} holds position {pos} but the example has {n} tokens "
                f"(valid: 0..{n - 1}, or -{n}..-1 from the end)"
            )


def peek_model_limits(name_or_path: str | Path) -> dict[str, int]:
    """``{"d_vocab", "n_ctx", "n_layers", "n_heads"}`` read from a model directory's ``config.json``.

    Works for probekit checkpoints and Hugging Face directories without loading weights;
    returns ``{}`` where the config is not at hand (e.g. a registered name not yet converted).
    """
    path = Path(name_or_path).expanduser() / "config.json"
    try:
        config = json.loads(read_text(path))
    except (OSError, ValueError):
        return {}
    if not isinstance(config, dict):
        return {}
    model = config.get("model") if isinstance(config.get("model"), dict) else config
    keys = {"d_vocab": ("d_vocab", "vocab_size"), "n_ctx": ("n_ctx", "max_position_embeddings"),
            "n_layers": ("n_layers", "num_hidden_layers"),
            "n_heads": ("n_heads", "num_attention_heads")}
    out: dict[str, int] = {}
    for name, options in keys.items():
        for key in options:
            if isinstance(model.get(key), int):
                out[name] = int(model[key])
                break
    return out
