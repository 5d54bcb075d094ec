"""Marker tables read from CSV / JSON records: types inferred, empty = missing, FILE:LINE errors."""

from __future__ import annotations

import json

import pytest

from probekit.diagnosis.table_io import read_marker_table, to_columns
from probekit.errors import DataError


def test_csv_types_and_missing_cells(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("name,noise,seed,he,acc,clauses\n"
                    "a,0,0,0.5,1,[2]\n"
                    "b,3,1,,0.25,\"[1,2]\"\n"
                    "\n"
                    "c,6,2,1e-3,0.5,2\n")
    t = to_columns(read_marker_table(path))
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
    ('a,b\n1,2\n3,"4\n5,6\n', r"m\.csv:3: the record starting here does not parse .*an unmatched"),
])
def test_csv_errors_name_the_line(tmp_path, body, match):
    path = tmp_path / "m.csv"
    path.write_text(body)
    with pytest.raises(DataError, match=match):
        read_marker_table(path)


def test_json_records(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"noise": 0, "he": 0.5, "knob": "x"}, {"noise": 1, "knob": "y"}]))
    assert to_columns(read_marker_table(path)) == {"noise": [0, 1], "he": [0.5, None],
                                                  "knob": ["x", "y"]}
    path.write_text(json.dumps({"records": [{"he": 1.0}, {"he": "0.5"}]}))
    with pytest.raises(DataError, match=r"record 1, key 'he': '0.5' is text"):
        read_marker_table(path)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"marker table .*nope\.csv not found"):
        read_marker_table(tmp_path / "nope.csv")
    (tmp_path / "m.xlsx").write_text("x")
    with pytest.raises(DataError, match="unknown table format '.xlsx'"):
        read_marker_table(tmp_path / "m.xlsx")


def test_read_marker_table_is_a_typed_dataframe(tmp_path):
    """The documented dtypes: Int64 (NA), float64 (NaN), object text (None), all-empty float64."""
    import numpy as np
    import pandas as pd

    path = tmp_path / "m.csv"
    path.write_text("seed,he,name,none,big\n"
                    "1,0.5,a,,12345678901234567890123\n"
                    ",,,,7\n"
                    "-3,2,c,,1\n")
    t = read_marker_table(path)
    assert isinstance(t, pd.DataFrame) and list(t.columns) == ["seed", "he", "name", "none", "big"]
    assert list(t.index) == [0, 1, 2]
    assert {c: str(t[c].dtype) for c in t.columns} == {
        "seed": "Int64", "he": "float64", "name": "object", "none": "float64", "big": "object"}
    assert t["seed"].tolist()[::2] == [1, -3] and t["seed"][1] is pd.NA
    assert t["he"][0] == 0.5 and np.isnan(t["he"][1]) and t["he"][2] == 2.0  # ints in a float column
    assert t["name"].tolist() == ["a", None, "c"] and t["none"].isna().all()
    assert t["big"].tolist() == [12345678901234567890123, 7, 1]  # beyond int64: exact Python ints
    assert to_columns(t) == {"seed": [1, None, -3], "he": [0.5, None, 2.0], "name": ["a", None, "c"],
                             "none": [None] * 3, "big": [12345678901234567890123, 7, 1]}


def test_quoted_multiline_cell_keeps_the_line_numbers(tmp_path):
    """A quoted cell spanning lines 2-4: the bad cell of the next record is on line 5."""
    path = tmp_path / "m.csv"
    path.write_text('note,y\n"first\nsecond\nthird",1\nok,x\nfine,2\nalso,3\n')
    with pytest.raises(DataError, match=r"m\.csv:5: column 'y': 'x' is not a number"):
        read_marker_table(path)
    path.write_text('note,y\n"first\nsecond",1\n\nok,nan\n')  # a blank line too
    with pytest.raises(DataError, match=r"m\.csv:5: column 'y': 'nan' is not a finite number"):
        read_marker_table(path)
    path.write_text('y,note\n1,"a\nb"\n2,c\n3\n')  # a ragged record after the multi-line one
    with pytest.raises(DataError, match=r"m\.csv:5: 1 cells but the header has 2 columns"):
        read_marker_table(path)
    path.write_text('note,y\n"a\nb",1\nc,2\n')
    assert to_columns(read_marker_table(path)) == {"note": ["a\nb", "c"], "y": [1, 2]}


def test_csv_values_are_the_floats_python_reads(tmp_path):
    """Every cell reads back as float(text) (pd.to_numeric's parser is not correctly rounded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(size=300), np.exp(rng.uniform(-700, 700, 300))])
    path = tmp_path / "m.csv"
    path.write_text("x,big\n" + "".join(f"{v!r},{'9' * 309 if i == 0 else '1_000'}\n"
                                        for i, v in enumerate(values.tolist())))
    with pytest.raises(DataError, match=r"m\.csv:2: column 'big': a 309-digit number is beyond"):
        read_marker_table(path)
    path.write_text("x,u\n" + "".join(f"{v!r},1_000\n" for v in values.tolist()))
    t = read_marker_table(path)
    assert t["x"].tolist() == values.tolist() and t["u"].tolist() == [1000] * 600  # int("1_000")


def test_marker_csv_writes_what_csv_writer_wrote(tmp_path):
    """markers.csv from the DataFrame: the bytes csv.writer gives, and a read table round-trips."""
    import csv
    import io

    from probekit.diagnosis.runner import _csv

    table = {"checkpoint": ["r/a", "r/b,c", 'q"d'], "step": [100, 200, 300], "final": [0, 1, 1],
             "lr": [0, 0.5, 1], "m": [0.1, None, 1e-05], "f": [True, False, None],
             "note": ["x", None, "two\nlines"], "empty": [None, None, None]}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(table))
    for row in zip(*table.values(), strict=True):
        writer.writerow(["" if v is None else v for v in row])
    assert _csv(table) == buf.getvalue()
    path = tmp_path / "markers.csv"
    path.write_text(_csv({k: v for k, v in table.items() if k != "lr"}))  # lr reads back as floats
    assert _csv(read_marker_table(path)) == path.read_text()
    assert _csv(dict(read_marker_table(path).items())) == path.read_text()  # column -> Series


def test_marker_analysis_of_the_dataframe_equals_the_dict_form():
    """The shipped HE table as read (DataFrame) and as column lists: the same analysis, exactly.

    A missing marker cell planted (NaN in the float64 column, None in the list) and an Int64
    column with a missing cell as a marker: both must be the same missing rows in the two forms.
    """
    from pathlib import Path

    import pandas as pd

    from probekit.diagnosis import marker_analysis

    root = Path(__file__).resolve().parents[2]
    frame = read_marker_table(root / "docs" / "diagnosis" / "he_noise" / "markers.csv")
    frame.loc[3, "modifier_he"] = float("nan")
    frame["count"] = pd.array([i % 7 if i != 5 else None for i in range(len(frame))], dtype="Int64")
    columns = to_columns(frame)
    assert columns["modifier_he"][3] is None and columns["count"][5] is None
    kw = {"markers": ["modifier_he", "sequence_he", "count"], "covariates": ("noise",),
          "groups": "seed", "n_permutations": 200}
    a = marker_analysis(frame, "ood_accuracy", **kw)
    b = marker_analysis(columns, "ood_accuracy", **kw)
    assert a.to_dict() == b.to_dict()
    assert a["modifier_he"].n_missing == 1 and a["count"].n_missing == 1


def test_diagnose_table_takes_the_dataframe_or_the_dict(tmp_path):
    """A table diagnosis of a DataFrame (or its column lists) = the diagnosis of its file.

    ``where`` keeps 6 of the 16 noise levels (30 models): the rows are selected on the DataFrame
    the same way in both; the written markers.csv files are the same bytes.
    """
    import dataclasses
    from pathlib import Path

    from probekit.diagnosis.table_diagnosis import diagnose_table, load_table_diagnosis

    root = Path(__file__).resolve().parents[2]
    spec = load_table_diagnosis(root / "probes" / "diagnose_he_study.toml")
    spec = dataclasses.replace(spec, where={"noise": [0, 1, 2, 3, 4, 5.0]},
                               diagnosis=dataclasses.replace(
                                   spec.diagnosis, calibration_simulations=0, n_permutations=100))
    frame = read_marker_table(spec.table)
    by_file = diagnose_table(spec, out=tmp_path / "file")
    by_frame = diagnose_table(spec, table=frame, out=tmp_path / "frame")
    by_dict = diagnose_table(spec, table=to_columns(frame))
    records = by_file.analysis.to_dict()
    assert by_frame.analysis.to_dict() == records == by_dict.analysis.to_dict()
    assert by_frame.table == by_file.table and len(by_file.table["noise"]) == 30
    assert by_frame.provenance["table"] == "(DataFrame)"
    assert by_frame.provenance["rows_in_table"] == by_file.provenance["rows_in_table"] == 80
    written = (tmp_path / "file" / "markers.csv").read_bytes()
    assert (tmp_path / "frame" / "markers.csv").read_bytes() == written
    assert written.splitlines()[:31] == spec.table.read_bytes().splitlines()[:31]  # noise 0-5 first
