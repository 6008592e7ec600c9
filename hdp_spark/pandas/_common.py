"""Plumbing shared by the pandas backend's aggregators: column checks and public key sets."""

from __future__ import annotations

import datetime
from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.keys import KEYS_FROM_DATA_MESSAGE, check_key_columns, public_keys
from hdp_spark.errors import ParameterError, SchemaError

__all__ = [
    "UNSAFE_SEED_MARK",
    "KeysLike",
    "check_key_types",
    "check_keys_not_derived",
    "key_table_rows",
    "mark_unsafe",
    "numeric_column",
    "release_keys",
]

UNSAFE_SEED_MARK = "hdp_unsafe_seed"
"""``DataFrame.attrs`` key (pandas) / field metadata key (Spark) of outputs made with a seed."""

KeysLike = Collection[object] | pd.DataFrame | None
"""A public key set: a list, tuple, set, Series, Index or array of keys (tuples for several
``by`` columns), or a DataFrame with the ``by`` columns. It must come from outside the data
(see :func:`check_keys_not_derived`)."""


def real_dtype(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds real numbers: numeric, not boolean, not complex
    (a complex column would lose its imaginary part when read as float)."""
    return (pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
            and not pd.api.types.is_complex_dtype(dtype))


def numeric_column(df: pd.DataFrame, column: str, role: str) -> npt.NDArray[np.float64]:
    """``df[column]`` as float64 (nulls as NaN); a SchemaError if missing or not numeric."""
    if column not in df.columns:
        msg = f"{role} column `{column}` is not in the table."
        raise SchemaError(msg)
    series = df[column]
    if not real_dtype(series.dtype):
        msg = f"{role} column `{column}` must be numeric (real), got dtype {series.dtype}."
        raise SchemaError(msg)
    out: npt.NDArray[np.float64] = series.to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def mark_unsafe(frame: pd.DataFrame, unsafe: bool) -> pd.DataFrame:
    """Mark a released frame made with ``unsafe_seed``: ``frame.attrs["hdp_unsafe_seed"]``.

    The released values and columns are unchanged; without a seed the frame is untouched
    (no attribute). pandas keeps ``attrs`` through copies, slices and ``to_parquet``.
    """
    if unsafe:
        frame.attrs[UNSAFE_SEED_MARK] = True
    return frame


def key_table_rows(keys: object, by: tuple[str, ...]) -> list[tuple[object, ...]] | None:
    """The ``by`` rows of a pandas key table; None when ``keys`` is not a DataFrame
    (see :func:`hdp_spark.core.keys.public_keys`)."""
    if not isinstance(keys, pd.DataFrame):
        return None
    check_key_columns(keys.columns, by)
    return list(keys[list(by)].itertuples(index=False, name=None))


def _arrays(obj: object) -> list[npt.NDArray[Any]]:
    """The numpy arrays behind a pandas/numpy object, without copying where pandas can."""
    if isinstance(obj, pd.DataFrame):
        return [obj.iloc[:, i].to_numpy(copy=False) for i in range(obj.shape[1])]
    if isinstance(obj, pd.Series | pd.Index):
        return [obj.to_numpy(copy=False)]
    if isinstance(obj, np.ndarray):
        return [obj]
    return []


def check_keys_not_derived(df: object, keys: object) -> None:
    """Reject a key set that is detectably derived from the input table ``df``.

    Detected: ``keys`` is ``df`` itself, or a Series, Index, array or DataFrame that shares
    memory with a column of ``df`` (``df["dept"]``, ``df["dept"].values``, a slice of
    ``df``). Not detectable: copies (``df["dept"].unique()``, ``df[["dept"]]``,
    ``drop_duplicates()``) and Python lists built from the data. The check looks at where
    the keys live, never at their values, so it reveals nothing about the data.

    Raises:
        ParameterError: the key set is derived from ``df``.
    """
    if keys is df:
        raise ParameterError(KEYS_FROM_DATA_MESSAGE.format(how="`keys` is the input table"))
    if not isinstance(df, pd.DataFrame):
        return
    key_arrays = _arrays(keys)
    if not key_arrays:
        return
    for i in range(df.shape[1]):
        column = df.iloc[:, i].to_numpy(copy=False)
        if any(np.may_share_memory(a, column) for a in key_arrays):
            how = f"it shares memory with column `{df.columns[i]}` of the input"
            raise ParameterError(KEYS_FROM_DATA_MESSAGE.format(how=how))


def check_key_types(
    df: pd.DataFrame, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...]
) -> None:
    """Reject a public key whose type can never equal a value of its ``by`` column.

    Such a key would select no rows and release an empty group (as the Spark backend
    refuses to). Numbers match numeric columns (integers also float columns, integral
    floats also integer columns), strings match string columns, dates and datetimes match
    datetime columns; object columns of mixed types are not checked.

    Raises:
        ParameterError: a key does not have the type of its column.
    """
    for i, column in enumerate(by):
        if column not in df.columns:
            continue  # reported as a SchemaError where the column is read
        series = df[column]
        accepts = _key_rule(series)
        if accepts is None:
            continue
        if not all(accepts(key[i]) for key in keys):
            msg = (
                f"every key in `keys` must have the type of its `by` column "
                f"(`{column}` {series.dtype})."
            )
            raise ParameterError(msg)


def _key_rule(series: pd.Series) -> Any:
    def is_number(v: object) -> bool:
        return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
            v, bool | np.bool_
        )

    if pd.api.types.is_bool_dtype(series):
        return lambda v: isinstance(v, bool | np.bool_)
    if pd.api.types.is_integer_dtype(series):
        return lambda v: is_number(v) and float(v).is_integer()  # type: ignore[arg-type]
    if pd.api.types.is_float_dtype(series):
        return is_number
    if pd.api.types.is_datetime64_any_dtype(series):
        return lambda v: isinstance(v, datetime.date | np.datetime64)
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    if pd.api.types.is_string_dtype(series) and inferred == "string":
        return lambda v: isinstance(v, str)
    if inferred in ("date", "datetime", "datetime64"):  # an object column of dates
        return lambda v: isinstance(v, datetime.date | np.datetime64)
    return None


def release_keys(
    df: object, keys: KeysLike, by: tuple[str, ...]
) -> tuple[tuple[object, ...], ...] | None:
    """The public key set of a release on ``df``: normalized, and typed like its columns.

    Raises:
        ParameterError: see :func:`check_keys_not_derived`,
            :func:`hdp_spark.core.keys.public_keys` and
            :func:`check_key_types`.
    """
    if keys is not None:
        check_keys_not_derived(df, keys)
    key_t = public_keys(keys, by, key_table_rows)
    if key_t is not None and isinstance(df, pd.DataFrame):
        check_key_types(df, by, key_t)
    return key_t
