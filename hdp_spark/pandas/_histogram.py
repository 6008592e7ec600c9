"""pandas implementation of the heterogeneous-DP histogram (same API as the Spark backend).

Usage::

    import hdp_spark.pandas as hpd
    spec = hpd.hdp_histogram("diagnosis", eps="eps", categories=["A", "B", "C"])
    hpd.histogram(pdf, spec)
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.histogram.release import (
    build_histogram_groups,
)
from hdp_spark.core.histogram.spec import MAX_INT_LABEL, HistogramSpec
from hdp_spark.core.keys import normalize_key
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import (
    numeric_column,
    real_dtype,
)

__all__ = ["category_codes", "histogram_tables"]


def _string_codes(series: pd.Series, spec: HistogramSpec) -> npt.NDArray[np.int64]:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        series = series.astype(object)
    elif not (pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)):
        msg = (
            f"category column `{spec.column}` must hold strings for string `categories`, "
            f"got dtype {dtype}."
        )
        raise SchemaError(msg)
    values = cast(Any, series).to_numpy(dtype=object, na_value=None)
    index = pd.Index(list(spec.categories), dtype=object)
    inferred = pd.api.types.infer_dtype(values, skipna=True)
    if inferred in ("string", "empty"):
        codes = index.get_indexer(pd.Index(values, dtype=object))
    else:
        # Mixed object column: only exact str instances can match (as on Spark, where the
        # column is a string column); other objects are unmatched, never compared.
        is_str = np.fromiter((type(x) is str for x in values), dtype=bool, count=len(values))
        safe = np.where(is_str, values, None)
        codes = np.where(is_str, index.get_indexer(pd.Index(safe, dtype=object)), -1)
    return np.asarray(codes, dtype=np.int64)


def _integer_codes(series: pd.Series, spec: HistogramSpec) -> npt.NDArray[np.int64]:
    dtype = series.dtype
    if not real_dtype(dtype):
        msg = (
            f"category column `{spec.column}` must be numeric (integer or float) for integer "
            f"`categories`, got dtype {dtype}."
        )
        raise SchemaError(msg)
    missing = series.isna().to_numpy()
    if pd.api.types.is_integer_dtype(dtype):
        raw_dtype: Any = getattr(dtype, "numpy_dtype", dtype)
        np_dtype = np.dtype(raw_dtype)
        filled = series.fillna(0) if missing.any() else series
        if np_dtype.kind == "u" and np_dtype.itemsize == 8:
            raw = filled.to_numpy(dtype=np.uint64)
            big = raw > np.uint64(MAX_INT_LABEL)  # cannot equal a label; keep int64 exact
            missing = missing | big
            values = np.where(big, np.uint64(0), raw).astype(np.int64)
        else:
            values = filled.to_numpy(dtype=np.int64)
        index = pd.Index(np.asarray(spec.categories, dtype=np.int64))
    else:
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        index = pd.Index(np.asarray(spec.categories, dtype=np.float64))
    codes = np.asarray(index.get_indexer(pd.Index(values)), dtype=np.int64)
    return np.where(missing, -1, codes)


def category_codes(df: pd.DataFrame, spec: HistogramSpec) -> npt.NDArray[np.int64]:
    """Per-row category code: j for ``categories[j]``, k₀ for null or out-of-domain.

    Matching rules (identical to the Spark backend): string labels need a string column
    and match by exact string equality; integer labels need a numeric column and match by
    numeric equality (int columns exactly, float columns as float64: 2.0 matches 2, 2.5,
    NaN and ±inf match nothing).

    Privacy:
        Per-row pre-processing by a public rule; a data value never raises (only the
        column's type, a public schema fact, can).
    """
    if spec.column not in df.columns:
        msg = f"category column `{spec.column}` is not in the table."
        raise SchemaError(msg)
    series = df[spec.column]
    codes = _string_codes(series, spec) if spec.kind == "str" else _integer_codes(series, spec)
    return np.where(codes < 0, spec.unmatched_code, codes)


def _filter_keys(
    df: pd.DataFrame, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...] | None
) -> pd.DataFrame:
    for col in by:
        if col not in df.columns:
            msg = f"group column `{col}` is not in the table."
            raise SchemaError(msg)
    if keys is None:
        return df
    if len(by) == 1:
        mask = df[by[0]].isin([k[0] for k in keys]).to_numpy()
    else:
        index = pd.MultiIndex.from_frame(df[list(by)])
        mask = np.asarray(index.isin(list(keys)))
    return df.loc[mask]


def histogram_tables(
    df: pd.DataFrame,
    spec: HistogramSpec,
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> dict[tuple[object, ...], GroupStats]:
    """Per-(group, ε level) tables; each level row's totals count the category codes.

    Privacy:
        NOT a release: the exact pre-noise counts. For tests and the trusted operator only;
        never publish them.
    """
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    df = _filter_keys(df, by, keys)
    eps = numeric_column(df, spec.eps, "ε")
    codes = category_codes(df, spec)
    frame = {f"__by{i}": df[c].to_numpy() for i, c in enumerate(by)}
    work = pd.DataFrame(frame | {"__level": levels_numpy(eps, spec.eps_grid), "__code": codes})
    group_cols = [*frame, "__level", "__code"]
    res = work.groupby(group_cols, sort=False, dropna=False).size().reset_index(name="__n")
    width = len(by)
    cells = (
        (
            tuple(normalize_key(k) for k in row[:width]),
            float(row[width]),
            int(row[width + 1]),
            int(row[width + 2]),
        )
        for row in res.itertuples(index=False, name=None)
    )
    return build_histogram_groups(spec, cells)


