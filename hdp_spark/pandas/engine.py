"""The pandas engine of the release pipeline (:class:`hdp_spark.core.pipeline.Engine`).

Holds no aggregator logic: it resolves public keys, checks schemas, computes the native
cells each request asks for (``level_tables``, ``histogram_tables``, ``ldp_tables``),
hands out the interactive providers of the user-level mean and the heavy hitters, and
turns released rows into a DataFrame typed by the kernels' output description.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.output_columns import ListColumn, OutputColumns
from hdp_spark.core.partial.spec import AttributeHistogramSpec, CodedSpec
from hdp_spark.core.pipeline import (
    CellRequest,
    Keys,
    OutputField,
    dispatch_cells,
)
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.user_mean import UserMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.pandas._common import mark_unsafe, release_keys

__all__ = ["PandasEngine"]

_DTYPES = {
    "float": "float64", "int": "int64", "bool": "bool", "str": "object",
    "float?": "Float64", "int?": "Int64", "bool?": "boolean", "str?": "object",
}
_NUMPY_DTYPES = frozenset({"float64", "int64", "bool"})


class PandasEngine:
    """Engine over one pandas DataFrame."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df

    def _frame(self) -> pd.DataFrame:
        if not isinstance(self.df, pd.DataFrame):
            msg = f"`df` must be a pandas DataFrame, got {type(self.df).__name__}."
            raise ParameterError(msg)
        return self.df

    def release_keys(self, keys: Any, by: tuple[str, ...]) -> Keys | None:
        return release_keys(self.df, keys, by)

    def check_schema(self, schema: TableSchema, specs: Sequence[object], by: Sequence[str]
                     ) -> None:
        from hdp_spark.pandas.schema import check_release

        check_release(self._frame(), schema, specs, by)

    def report_marks(self) -> dict[str, str]:
        from hdp_spark.pandas.ldp import report_marks

        return report_marks(self.df)

    def cells(self, requests: Sequence[CellRequest], by: tuple[str, ...], keys: Keys | None
              ) -> list[Mapping[tuple[object, ...], Any]]:
        from hdp_spark.pandas._histogram import histogram_tables
        from hdp_spark.pandas._mean import level_tables
        from hdp_spark.pandas.ldp import ldp_tables

        return dispatch_cells(requests, self.df, by, keys, levels=level_tables,
                              categories=histogram_tables, ldp=ldp_tables)

    @contextmanager
    def users(self, spec: UserMeanSpec, by: tuple[str, ...], keys: Keys) -> Iterator[Any]:
        from hdp_spark.pandas._user_mean import PandasUsers

        yield PandasUsers(self.df, spec, by, keys)

    @contextmanager
    def tree_counter(self, spec: CodedSpec) -> Iterator[Any]:
        from hdp_spark.pandas._heavy_hitters import PandasTreeCounter, bounded_persons

        df = bounded_persons(self._frame(), spec.privacy_unit, spec.max_rows)
        yield PandasTreeCounter.from_frame(df, spec)

    def attribute_counts(self, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
        from hdp_spark.pandas._heavy_hitters import attribute_counts

        return attribute_counts(self.df, spec)

    def bounded(self, unit: PrivacyUnit, eps: str, by: tuple[str, ...], keys: Keys | None,
                specs: Sequence[object], key: ReleaseKey) -> PandasEngine:
        from hdp_spark.pandas.privacy_unit import bound_frame

        return PandasEngine(bound_frame(self._frame(), unit, eps=eps, by=by, keys=keys,
                                        specs=specs, key=key))

    def ldp_bounded(self, unit: PrivacyUnit, spec: Any, key: ReleaseKey) -> PandasEngine:
        from hdp_spark.pandas.privacy_unit import keep_one_report

        return PandasEngine(keep_one_report(self._frame(), unit, spec, key))

    def public(self, columns: Sequence[str], constants: Mapping[str, float]) -> PandasEngine:
        frame = self._frame()
        out = pd.DataFrame({c: frame[c] for c in dict.fromkeys(columns) if c in frame.columns},
                           index=frame.index)
        for name, value in constants.items():
            out[name] = float(value)
        return PandasEngine(out)

    def materialize(self, by: tuple[str, ...], columns: Sequence[tuple[str, OutputField]],
                    rows: list[tuple[Any, ...]] | OutputColumns, unsafe: bool
                    ) -> pd.DataFrame:
        return mark_unsafe(frame(by, columns, rows), unsafe)


def _column(values: list[Any], kind: str) -> Any:
    dtype = _DTYPES.get(kind)
    if dtype is None or dtype == "object":
        arr = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):  # element-wise: lists stay one object each
            arr[i] = value
        return arr
    if dtype in _NUMPY_DTYPES:  # what pd.array would hold, without its inference pass
        return np.array(values, dtype=dtype)
    return pd.array(values, dtype=dtype)  # type: ignore[call-overload]


def frame(by: Sequence[str], columns: Sequence[tuple[str, OutputField]],
          rows: list[tuple[Any, ...]] | OutputColumns) -> pd.DataFrame:
    """Released rows (group values, then ``columns``; row tuples or
    :class:`~hdp_spark.core.output_columns.OutputColumns`) as a DataFrame: the group columns
    keep the values' inferred dtypes, the others get the dtype of their kind."""
    width = len(by)
    if isinstance(rows, OutputColumns):
        lists = [c.rows() if isinstance(c, ListColumn) else c for c in rows.columns]
    else:
        lists = [[r[j] for r in rows] for j in range(width + len(columns))]
    data: dict[str, Any] = {}
    for j, name in enumerate(by):
        data[name] = pd.Series(lists[j], dtype=None if len(rows) else object)
    for j, (name, f) in enumerate(columns):
        data[name] = _column(lists[width + j], f.kind)
    names = [*by, *(n for n, _ in columns)]
    if len(data) == len(names):  # distinct names: data holds every column, in order
        # the columns are this call's own new arrays: no copy (pandas copies a dict's
        # arrays by default, and reindexes it when given ``columns``)
        return pd.DataFrame(data, copy=False)
    return pd.DataFrame(data, columns=names)
