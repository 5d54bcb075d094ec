"""Marker tables read from CSV / JSON records: types inferred, empty = missing, FILE:LINE errors."""

from __future__ import annotations

import json

import pytest

from probekit.diagnosis.table_io import read_marker_table
from probekit.errors import DataError


def test_csv_types_and_missing_cells(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("name,noise,seed,he,acc,clauses\n"
                    "a,0,0,0.5,1,[2]\n"
                    "b,3,1,,0.25,\"[1,2]\"\n"
                    "\n"
                    "c,6,2,1e-3,0.5,2\n")
    t = read_marker_table(path)
    assert t["name"] == ["a", "b", "c"]
    assert t["noise"] == [0, 3, 6] and all(type(v) is int for v in t["noise"])
    assert t["he"] == [0.5, None, 0.001]
    assert t["acc"] == [1.0, 0.25, 0.5] and all(type(v) is float for v in t["acc"])
    assert t["clauses"] == ["[2]", "[1,2]", "2"]  # mostly text: every cell kept as text


@pytest.mark.parametrize(("body", "match"), [
    ("a,b\n1,2\n3,x\n4,5\n", r"m\.csv:3: column 'b': 'x' is not a number"),
    ("a,b\n1,2\n3,nan\n", r"m\.csv:3: column 'b': 'nan' is not a finite number"),
    ("a,b\n1,2\n3\n", r"m\.csv:3: 1 cells but the header has 2 columns"),
    ("a,a\n1,2\n", r"m\.csv:1: column 'a' appears twice"),
    ("a,b\n", r"m\.csv: no rows after the header"),
])
def test_csv_errors_name_the_line(tmp_path, body, match):
    path = tmp_path / "m.csv"
    path.write_text(body)
    with pytest.raises(DataError, match=match):
        read_marker_table(path)


def test_json_records(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"noise": 0, "he": 0.5, "knob": "x"}, {"noise": 1, "knob": "y"}]))
    assert read_marker_table(path) == {"noise": [0, 1], "he": [0.5, None], "knob": ["x", "y"]}
    path.write_text(json.dumps({"records": [{"he": 1.0}, {"he": "0.5"}]}))
    with pytest.raises(DataError, match=r"record 1, key 'he': '0.5' is text"):
        read_marker_table(path)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"marker table .*nope\.csv not found"):
        read_marker_table(tmp_path / "nope.csv")
    (tmp_path / "m.xlsx").write_text("x")
    with pytest.raises(DataError, match="unknown table format '.xlsx'"):
        read_marker_table(tmp_path / "m.xlsx")
