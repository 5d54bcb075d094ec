"""The one decoder of user text files (probekit.textfile) and the readers routed through it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from probekit.cli import main
from probekit.errors import DataError
from probekit.textfile import decode_text, read_text, wide_encoding

TEXT = 'name = "café ∂"\n# déjà vu\nn = 3\n'  # Latin-1, beyond Latin-1 and ASCII characters
WITH_MARK = ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]


def _encoded(encoding: str) -> bytes:
    """``TEXT`` in ``encoding``, with a byte-order mark for the explicit-endian names."""
    marks = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff",
             "utf-32-le": b"\xff\xfe\x00\x00", "utf-32-be": b"\x00\x00\xfe\xff"}
    return marks.get(encoding, b"") + TEXT.encode(encoding)


@pytest.mark.parametrize("encoding", WITH_MARK)
def test_a_byte_order_mark_names_the_encoding(encoding):
    assert decode_text(_encoded(encoding), "f.toml") == TEXT


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_utf16_and_utf32_without_a_mark_are_told_by_their_nul_bytes(encoding):
    data = TEXT.encode(encoding)
    assert wide_encoding(data) == encoding
    assert decode_text(data, "f.toml") == TEXT


def test_plain_utf8_has_no_wide_encoding():
    assert wide_encoding(TEXT.encode("utf-8")) is None
    assert decode_text(TEXT.encode("utf-8"), "f.toml") == TEXT


@pytest.mark.parametrize("data", [
    TEXT.encode("utf-16-le")[:-1],          # UTF-16 cut by one byte: odd length
    b"n = 1\n\x00\x00\x07binary\x00",       # NULs in no text pattern
    b"\x00a\x00b\x00c\x00d\x00e\x00",       # odd length with alternating NULs
])
def test_nul_bytes_in_no_text_pattern_are_refused_naming_file_and_fix(data):
    with pytest.raises(DataError, match=r"^f\.toml: byte \d+ is a NUL byte.*without a byte-order "
                                        r"mark; save the file as UTF-8$"):
        decode_text(data, "f.toml")


def test_a_byte_not_utf8_is_named_at_its_line_and_column():
    data = b'a = 1\nb = "caf\xe9"\n'
    with pytest.raises(DataError, match=r"^f\.toml:2:9: byte 0xe9 is not UTF-8; save the file as UTF-8$"):
        decode_text(data, "f.toml")
    with pytest.raises(DataError, match=r"^f\.toml:1:3: byte 0xff"):  # after a UTF-8 mark
        decode_text(b"\xef\xbb\xbfab\xff", "f.toml")
    with pytest.raises(DataError, match=r"starts with a utf-16 byte-order mark but byte 2"):
        decode_text(b"\xff\xfe\x00\xd8a\x00", "f.toml")  # a lone surrogate


def test_latin1_fallback_reads_the_file_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert decode_text(b"x\ncaf\xe9\n", "t.csv", fallback="latin-1") == "x\ncafé\n"
    assert [str(w.message) for w in caught] == [
        "t.csv:2: byte 0xe9 is not UTF-8; read the file as Latin-1 (ISO-8859-1); save it as "
        "UTF-8 if its text looks wrong"]


# ------------------------------------------------------------ every reader goes through it


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32-be", "utf-8-sig"])
def test_toml_jsonl_and_csv_readers_decode_every_encoding(tmp_path, encoding):
    """Suites, JSONL data and marker tables read the same values from any encoding."""
    from probekit.diagnosis.table_io import read_marker_table
    from probekit.inputs import read_jsonl
    from probekit.suites.spec import read_toml

    toml = '[suite]\nname = "café"\n[capture]\nsites = ["resid_post@0"]\n'
    jsonl = '{"text": "déjà", "y": 1}\n{"text": "vu", "y": 0}\n'
    csv = "model,marker,y\ncafé,0.5,1\nthé,0.25,0\n"
    for name, text in [("s.toml", toml), ("d.jsonl", jsonl), ("t.csv", csv)]:
        (tmp_path / f"utf8-{name}").write_text(text, encoding="utf-8")
        (tmp_path / name).write_bytes(text.encode(encoding))
    assert read_toml(tmp_path / "s.toml")[2] == read_toml(tmp_path / "utf8-s.toml")[2]
    assert ([r.data for r in read_jsonl(tmp_path / "d.jsonl")]
            == [r.data for r in read_jsonl(tmp_path / "utf8-d.jsonl")])
    assert read_marker_table(tmp_path / "t.csv").equals(read_marker_table(tmp_path / "utf8-t.csv"))


def test_finetune_data_and_design_csv_decode_utf16(tmp_path):
    from probekit.train.finetune_data import read_rows

    rows = [{"prompt": "été", "answer": " a", "split": "train"}]
    path = tmp_path / "ft.jsonl"
    path.write_bytes("\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode("utf-16"))
    assert [{k: r[k] for k in ("prompt", "answer", "split")} for r in read_rows(path, "train")] == rows
    assert read_text(path) == path.read_bytes().decode("utf-16")


def _suite_copy(root: Path) -> Path:
    assert main(["examples", "copy", "modadd_grokked", str(root)]) == 0
    return root / "probes" / "modadd_grokked.toml"


def test_cli_check_accepts_a_utf16_suite_and_refuses_a_cut_one(tmp_path, capsys):
    suite = _suite_copy(tmp_path / "ex")
    text = suite.read_text(encoding="utf-8")
    suite.write_bytes(text.encode("utf-16"))  # Windows' "Unicode" save: UTF-16 LE with a mark
    assert main(["report", str(suite), "--check"]) == 0
    assert "suite and data are valid" in capsys.readouterr().out
    cut = suite.with_name("cut.toml")
    cut.write_bytes(text.encode("utf-16-le")[:-1])
    before = sorted(p.name for p in suite.parent.iterdir())
    assert main(["report", str(cut), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{cut}: byte 1 is a NUL byte" in err and err.endswith("save the file as UTF-8")
    assert sorted(p.name for p in suite.parent.iterdir()) == before
