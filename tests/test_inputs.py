"""The one JSONL parser (probekit.inputs): FILE:LINE:COLUMN of every value, syntax error and bad byte."""

import json

import numpy as np
import pytest

from probekit.errors import DataError
from probekit.inputs import parse_jsonl_line, read_jsonl


def _random_line(rng: np.random.Generator) -> tuple[str, dict]:
    values = [1, -2.5, "a b", "é ☃ \"quoted\" , : {", None, True, [1, [2, {"x": "}"}]], {"k": [1, 2]}, "",
              1e-9, "\\u00e9"]
    keys = ["tokens", "text", "label", "ключ", 'we"ird', "split", "pos"]
    chosen = rng.choice(len(keys), size=int(rng.integers(1, len(keys) + 1)), replace=False)
    obj = {keys[i]: values[int(rng.integers(len(values)))] for i in chosen}
    seps = [(",", ":"), (", ", ": "), (" ,  ", " :\t")]
    item, key = seps[int(rng.integers(len(seps)))]
    line = " " * int(rng.integers(3)) + json.dumps(obj, separators=(item, key),
                                                   ensure_ascii=bool(rng.integers(2)))
    return line, obj


@pytest.mark.parametrize("seed", range(40))
def test_value_columns_agree_with_the_stdlib_decoder(seed):
    line, obj = _random_line(np.random.default_rng(seed))
    row = parse_jsonl_line(line, path="f.jsonl", lineno=3)
    assert row.data == obj
    decoder = json.JSONDecoder()
    for key, value in obj.items():
        col = row.columns[key]
        parsed, _ = decoder.raw_decode(line, col - 1)  # the value starts exactly there
        assert parsed == value
        assert row.at(key) == f"f.jsonl:3:{col}"
    assert row.at("absent") == f"f.jsonl:3:{len(line) - len(line.lstrip()) + 1}"


@pytest.mark.parametrize(("line", "message"), [
    ('{"a": 1, "b": }', "f.jsonl:1:15: not valid JSON (Expecting value)"),
    ('{"a": 1 "b": 2}', "f.jsonl:1:9: not valid JSON (Expecting ',' delimiter)"),
    ('  [1, 2]', "f.jsonl:1:3: expected a JSON object"),
    ('{"s": "Infinity", "x": Infinity}', "f.jsonl:1:24: Infinity is not a number"),
    ('{"a": 1, "b": {"c": 1}, "a": 2}', "f.jsonl:1:25: key 'a' appears twice in one object"),
    ('{"a": {"c": 1, "c": 2}}', "key 'c' appears twice in one object"),
])
def test_errors_name_the_real_column(line, message):
    with pytest.raises(DataError) as err:
        parse_jsonl_line(line, path="f.jsonl", lineno=1)
    assert message in str(err.value)


def test_bad_bytes_and_byte_order_mark(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"tokens": [1]}\n{"text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"d.jsonl:2:14: byte 0xe9 is not UTF-8; save the file as UTF-8"):
        read_jsonl(path)
    path.write_bytes(b'\xef\xbb\xbf{"tokens": [1]}\r\n{"text": "caf\xc3\xa9"}\r\n')
    rows = read_jsonl(path)  # a BOM and CRLF line ends are fine
    assert [r.data for r in rows] == [{"tokens": [1]}, {"text": "café"}]
    assert rows[1].at("text") == f"{path}:2:10"
