"""Helpers of the schema tests (imported by the test modules of this folder)."""

from __future__ import annotations

from typing import Any

import pandas as pd

MARKERS = ("4242", "1717", "9876", "7373", "3030", "zz_secret")
"""Digit strings of the data values planted in test tables: no message may contain them."""


def spark_type(series: pd.Series[Any]) -> str:
    """The Spark SQL type of a pandas column."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(series.dtype):
        return "bigint"
    if pd.api.types.is_float_dtype(series.dtype):
        return "double"
    return "string"


def py_value(value: Any) -> Any:
    """A pandas/numpy scalar as a plain Python value (NA -> None, NaN stays NaN)."""
    if value is None or value is pd.NA:
        return None
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def build_native(engine: Any, pdf: pd.DataFrame) -> Any:
    """The engine's table for ``pdf`` (Spark: explicit types, rows spread over 2 slices)."""
    if engine.name == "pandas":
        return pdf.copy()
    ddl = ", ".join(f"`{c}` {spark_type(pdf[c])}" for c in pdf.columns)
    rows = [tuple(py_value(v) for v in row) for row in pdf.astype(object).itertuples(index=False)]
    return engine.session.createDataFrame(rows, schema=ddl)


def to_pandas(engine: Any, out: Any) -> pd.DataFrame:
    """An ``agg`` output as pandas."""
    frame: pd.DataFrame = out if engine.name == "pandas" else out.toPandas()
    return frame


def assert_no_data(message: str) -> None:
    """No planted data value appears in an error message."""
    for marker in MARKERS:
        assert marker not in message, f"data value {marker} leaked into: {message}"
