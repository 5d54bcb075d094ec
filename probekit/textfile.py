"""The one decoder of every text file a user gives probekit: TOML, JSONL, CSV, JSON.

A leaf module (imports only :mod:`probekit.errors`). Suites, claim and diagnosis files
(``suites.spec.read_toml``), JSONL data and eval files (``inputs.read_jsonl``, fine-tune data),
marker tables and design CSVs, and model ``config.json`` files are all read through
:func:`read_text`, so each encoding is handled, or refused, the same way everywhere:

- a **byte-order mark** selects the encoding: UTF-8 (``EF BB BF``), UTF-16 LE/BE, UTF-32 LE/BE
  (Windows' "Unicode text" and Excel's "Unicode text" exports are UTF-16 with a mark); the mark
  is dropped;
- **no mark, NUL bytes**: no TOML, JSON or CSV text holds a NUL, so NULs are the fingerprint of
  a UTF-16/32 file saved without a mark. Mostly-ASCII text in UTF-16 LE has a NUL in every
  odd byte (BE: every even byte), in UTF-32 three NULs per four bytes; such a file is decoded
  in that encoding. NUL bytes in any other pattern (a binary file) are refused, naming the
  file, the byte and the fix;
- otherwise **UTF-8**. A byte that is not UTF-8 is an error naming ``FILE:LINE:COLUMN`` and the
  fix ("save the file as UTF-8"), or, with ``fallback="latin-1"`` (marker tables: a
  spreadsheet export in a Western code page), the file is read as Latin-1 with a warning.
"""

from __future__ import annotations

import codecs
import warnings
from pathlib import Path
from typing import Literal

from .errors import DataError

__all__ = ["decode_text", "read_text", "wide_encoding"]

#: (mark, codec) of the wide encodings (UTF-8's mark is dropped first): UTF-32 first, since ``FF FE 00 00`` starts with UTF-16 LE's ``FF FE``
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_FIX = "save the file as UTF-8"

Fallback = Literal["error", "latin-1"]


def wide_encoding(data: bytes) -> str | None:
    """The encoding of BOM-less UTF-16/32 text, told by where its NUL bytes fall (None: no NULs).

    ``"utf-32-le"`` / ``"utf-32-be"`` when every code unit has its two high (low) bytes NUL;
    ``"utf-16-le"`` / ``"utf-16-be"`` when NULs fall only on odd (even) bytes; ``""`` when the
    file holds NULs in no such pattern (not text).
    """
    if b"\x00" not in data:
        return None
    n = len(data)
    if n % 4 == 0:
        if not data[2::4].strip(b"\x00") and not data[3::4].strip(b"\x00"):
            return "utf-32-le"
        if not data[0::4].strip(b"\x00") and not data[1::4].strip(b"\x00"):
            return "utf-32-be"
    if n % 2 == 0:
        even, odd = data[0::2].count(0), data[1::2].count(0)
        if odd and not even:
            return "utf-16-le"
        if even and not odd:
            return "utf-16-be"
    return ""


def _position(text_before: str) -> str:
    """``LINE:COLUMN`` (1-based) just after ``text_before``."""
    line = text_before.count("\n") + 1
    return f"{line}:{len(text_before) - (text_before.rfind(chr(10)) + 1) + 1}"


def decode_text(data: bytes, path: str | Path, *, fallback: Fallback = "error") -> str:
    """``data`` (the bytes of the file ``path``) as text; see the module docstring for the rules.

    Raises:
        DataError: bytes that are not text in the encoding found (``FILE:LINE:COLUMN`` where it
            can be told, the byte, and the fix "save the file as UTF-8").
    """
    if data.startswith(codecs.BOM_UTF8):  # UTF-8 all the same: a bad byte is named as below
        data = data[len(codecs.BOM_UTF8):]
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError as err:
                raise DataError(f"{path}: starts with a {encoding} byte-order mark but byte "
                                f"{err.start} is not {encoding}; {_FIX}") from None
    wide = wide_encoding(data)
    if wide is not None:
        text = None
        if wide:
            try:
                text = data.decode(wide)
            except UnicodeDecodeError:
                text = None
        if text is None or "\x00" in text:
            at = data.index(b"\x00")
            raise DataError(
                f"{path}: byte {at} is a NUL byte, which no text file holds: not a text file, "
                f"or UTF-16/UTF-32 without a byte-order mark; {_FIX}"
            )
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = _position(data[: err.start].decode("utf-8", errors="replace"))
        byte = f"byte 0x{data[err.start]:02x} is not UTF-8"
        if fallback == "latin-1":
            warnings.warn(f"{path}:{where.split(':')[0]}: {byte}; read the file as Latin-1 "
                          "(ISO-8859-1); save it as UTF-8 if its text looks wrong", stacklevel=4)
            return data.decode("latin-1")
        raise DataError(f"{path}:{where}: {byte}; {_FIX}") from None


def read_text(path: str | Path, *, fallback: Fallback = "error") -> str:
    """The text of the file ``path``, decoded by :func:`decode_text`.

    Raises:
        DataError: as :func:`decode_text`. A missing or unreadable file raises the ``OSError``
            (callers check existence first and name the file in their own words).
    """
    return decode_text(Path(path).read_bytes(), path, fallback=fallback)
