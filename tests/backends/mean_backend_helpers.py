"""Helpers shared by the backend mean tests: build the same table on both engines with an
explicit schema (true nulls, empty tables), and compare released outputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

COLUMNS = ("g", "x", "y", "eps", "eps2")


def spark_schema(columns: Sequence[str] = COLUMNS) -> Any:
    """Spark schema: `g` string, every other column double."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(c, T.StringType() if c == "g" else T.DoubleType(), True) for c in columns]
    )


def pandas_frame(rows: Sequence[Sequence[Any]], columns: Sequence[str] = COLUMNS) -> pd.DataFrame:
    """The pandas table of ``rows`` (None -> NaN in numeric columns, None in `g`)."""
    data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    frame = {
        c: pd.Series(v, dtype=object if c == "g" else "float64") for c, v in data.items()
    }
    return pd.DataFrame(frame, columns=list(columns))


def spark_frame(spark: Any, rows: Sequence[Sequence[Any]], columns: Sequence[str] = COLUMNS,
                partitions: int = 3) -> Any:
    """The Spark table of ``rows`` with true nulls, repartitioned (row order differs)."""
    return spark.createDataFrame([tuple(r) for r in rows], spark_schema(columns)).repartition(
        partitions
    )


def native(engine: Any, rows: Sequence[Sequence[Any]], columns: Sequence[str] = COLUMNS) -> Any:
    """The engine's native table."""
    if engine.name == "pandas":
        return pandas_frame(rows, columns)
    return spark_frame(engine.session, rows, columns)


def run_agg(engine: Any, rows: Sequence[Sequence[Any]], *specs: Any,
            columns: Sequence[str] = COLUMNS, **kwargs: Any) -> pd.DataFrame:
    """``agg`` on the engine, output as pandas."""
    out = engine.module.agg(native(engine, rows, columns), *specs, **kwargs)
    return out if engine.name == "pandas" else out.toPandas()


def plain(value: Any) -> Any:
    """Output cell -> plain Python (Spark Rows and numpy arrays to dicts and lists)."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ndarray":
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        return value.item()
    return value


def same(a: Any, b: Any) -> bool:
    """Exact equality of output cells, NaN equal to NaN."""
    a, b = plain(a), plain(b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def assert_same_frames(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Same columns, same rows, every cell exactly equal."""
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for col in a.columns:
        for i in range(len(a)):
            assert same(a[col].iloc[i], b[col].iloc[i]), (col, i, a[col].iloc[i], b[col].iloc[i])
