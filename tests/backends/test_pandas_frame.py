"""The pandas engine's output frame (`hdp_spark.pandas.engine.frame`): the same frame as
building it from the column dict with explicit `columns` (what it did before it skipped
that copy), for distinct names and for a name the group column shares."""

from __future__ import annotations

import numpy as np
import pandas as pd

import hdp_spark.pandas as hpd
from hdp_spark.core.pipeline import OutputField
from hdp_spark.pandas.engine import _column, frame


def _reference(by: list[str], columns: list[tuple[str, OutputField]],
               rows: list[tuple[object, ...]]) -> pd.DataFrame:
    data: dict[str, object] = {}
    for j, name in enumerate(by):
        data[name] = pd.Series([r[j] for r in rows], dtype=None if rows else object)
    for j, (name, f) in enumerate(columns):
        data[name] = _column([r[len(by) + j] for r in rows], f.kind)
    return pd.DataFrame(data, columns=[*by, *(n for n, _ in columns)])


_COLUMNS = [
    ("m", OutputField("", "float")), ("m_n", OutputField("_n", "int")),
    ("m_ok", OutputField("_ok", "bool")), ("m_method", OutputField("_method", "str")),
    ("m_levels", OutputField("_levels", "list")), ("m_opt", OutputField("_opt", "float?")),
]
_ROWS = [
    ("a", 1.5, 3, True, "adpm", [{"eps": 1.0}], None),
    ("b", float("nan"), 0, False, "adpm", [], 2.0),
]


def test_frame_equals_the_reindexed_copy() -> None:
    got = frame(["g"], _COLUMNS, list(_ROWS))
    want = _reference(["g"], _COLUMNS, list(_ROWS))
    pd.testing.assert_frame_equal(got, want)
    assert list(got.columns) == ["g", "m", "m_n", "m_ok", "m_method", "m_levels", "m_opt"]
    assert [str(t) for t in got.dtypes] == [
        "object", "float64", "int64", "bool", "object", "object", "Float64"]
    assert got["m_levels"].iloc[0] == [{"eps": 1.0}]
    empty = frame(["g"], _COLUMNS, [])
    pd.testing.assert_frame_equal(empty, _reference(["g"], _COLUMNS, []))
    assert len(empty) == 0


def test_frame_with_a_shared_name_keeps_every_column() -> None:
    cols = [("g", OutputField("", "float")), ("g_n", OutputField("_n", "int"))]
    rows: list[tuple[object, ...]] = [("a", 1.0, 2), ("b", 3.0, 4)]
    got = frame(["g"], cols, rows)
    pd.testing.assert_frame_equal(got, _reference(["g"], cols, rows))
    assert list(got.columns) == ["g", "g", "g_n"]


def test_release_frame_columns_are_its_own() -> None:
    df = pd.DataFrame({"x": np.linspace(0, 10, 40), "eps": 1.0, "g": ["a", "b"] * 20})
    out = hpd.agg(df, hpd.hdp_mean("x", eps="eps", lower=0, upper=10), by="g",
                  keys=["a", "b"], unsafe_seed=3)
    again = hpd.agg(df, hpd.hdp_mean("x", eps="eps", lower=0, upper=10), by="g",
                    keys=["a", "b"], unsafe_seed=3)
    out.loc[0, "x_mean"] = -1.0  # writing one output leaves another release's untouched
    assert again.loc[0, "x_mean"] != -1.0
    assert out.attrs == {"hdp_unsafe_seed": True}
