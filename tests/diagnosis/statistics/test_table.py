"""Marker-table validation: kinds, one-hot coding, clear messages."""

import numpy as np
import pytest

from probekit.diagnosis.statistics.table import as_marker_table
from probekit.errors import ConfigError, DataError


def test_kinds_missing_and_one_hot():
    t = as_marker_table({"arch": ["b", "a", "c", "a"], "x": [1, 2.5, None, float("nan")],
                         "flag": [True, False, True, True]})
    assert t.kinds == {"arch": "categorical", "x": "numeric", "flag": "numeric"}
    assert t.missing("x").tolist() == [False, False, True, True]
    X, terms = t.design(["arch", "flag"])
    assert terms == ("arch=b", "arch=c", "flag=True")  # two levels: a factor
    np.testing.assert_array_equal(X, [[1, 0, 1], [0, 0, 0], [0, 1, 1], [0, 0, 1]])
    np.testing.assert_array_equal(t.numeric("x", "marker", allow_missing=True)[:2], [1, 2.5])


def test_dataframe_duck_typed():
    pd = pytest.importorskip("pandas")
    t = as_marker_table(pd.DataFrame({"a": [1.0, np.nan], "b": ["u", "v"]}))
    assert t.kinds == {"a": "numeric", "b": "categorical"} and t.missing("a").tolist() == [False, True]


def test_messages():
    with pytest.raises(ConfigError, match="table must be a mapping column -> sequence or a pandas "
                       "DataFrame, got list"):
        as_marker_table([1, 2])
    with pytest.raises(DataError, match="ragged table: column 'a' has 2 rows but column 'b' has 3"):
        as_marker_table({"a": [1, 2], "b": [1, 2, 3]})
    with pytest.raises(DataError, match="column 'a' mixes numbers and text"):
        as_marker_table({"a": [1, "x"]})
    t = as_marker_table({"a": [1, None, 3], "s": ["u", "v", "w"]})
    with pytest.raises(DataError, match=r"covariate column 'a' has missing \(None/NaN\) cells in rows 1"):
        t.design(["a"])
    with pytest.raises(DataError, match="outcome column 's' holds text"):
        t.numeric("s", "outcome")
    with pytest.raises(DataError, match="infinite values in rows 0"):
        as_marker_table({"a": [float("inf"), 1.0]}).numeric("a", "marker", allow_missing=True)
    with pytest.raises(ConfigError, match="groups column 'g' is not in the table; valid columns: 'a', 's'"):
        t.codes("g", "groups")
