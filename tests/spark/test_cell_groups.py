"""The driver's coding of the collected cells' groups (spark/_common.py): the Arrow path
(one key column of an integer, string, boolean or date type) keeps the same cells, gives
the same codes and keys in the same order as the tuple path, and filters the same keys."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pytest
from pyspark.sql import types as T

from hdp_spark.spark._common import collect_cell_groups, collect_cells_arrow, group_codes

ROWS: dict[str, list[Any]] = {
    "int": [3, 1, 3, None, 2, 1, 7, 3],
    "str": ["b", "a", "b", None, "ç", "a", "zz", "b"],
    "bool": [True, False, True, None, True, False, False, True],
    "date": [datetime.date(2024, 1, d) if d else None for d in (3, 1, 3, 0, 2, 1, 7, 3)],
    "double": [0.0, -0.0, 1.5, None, 2.0, 1.5, float("nan"), 0.0],
}
TYPES = {"int": T.IntegerType(), "str": T.StringType(), "bool": T.BooleanType(),
         "date": T.DateType(), "double": T.DoubleType()}


def _frame(spark: Any, kind: str) -> Any:
    schema = T.StructType([T.StructField("k", TYPES[kind]), T.StructField("n", T.LongType())])
    return spark.createDataFrame([(k, i) for i, k in enumerate(ROWS[kind])], schema)


def _tuple_path(df: Any, fields: Any, keys: Any) -> tuple[list[Any], list[Any], list[int]]:
    found, table = collect_cells_arrow(df, fields, keys)
    group_of, group_keys = group_codes(found)
    return group_of.tolist(), group_keys, table.column("n").to_pylist()


@pytest.mark.parametrize("kind", sorted(ROWS))
@pytest.mark.parametrize("public", [None, "some", "all"])
def test_coded_groups_equal_the_tuple_path(spark: Any, kind: str, public: str | None) -> None:
    df = _frame(spark, kind)
    fields = [df.schema["k"]]
    values = [v for v in dict.fromkeys(ROWS[kind]) if v is not None and v == v]
    keys = (None if public is None
            else tuple((v,) for v in (values if public == "all" else values[::2])))
    group_of, group_keys, table = collect_cell_groups(df, fields, keys)
    want = _tuple_path(df, fields, keys)
    assert isinstance(group_of, np.ndarray)
    assert group_of.dtype == np.int64
    got = (group_of.tolist(), group_keys, table.column("n").to_pylist())
    if kind == "double":  # not coded by Arrow: the tuple path itself (NaN keys by repr)
        assert repr(got) == repr(want)
    else:
        assert got == want
    assert "k" not in table.column_names


def test_two_key_columns_take_the_tuple_path(spark: Any) -> None:
    df = spark.createDataFrame([(1, "a", 0), (1, "b", 1), (1, "a", 2)], "k int, j string, n long")
    fields = [df.schema["k"], df.schema["j"]]
    group_of, group_keys, table = collect_cell_groups(df, fields, ((1, "a"),))
    assert group_of.tolist() == [0, 0]
    assert group_keys == [(1, "a")]
    assert table.column("n").to_pylist() == [0, 2]
