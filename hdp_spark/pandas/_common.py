"""Plumbing shared by the pandas backend's aggregators: column checks and public key sets."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.keys import normalize_keys
from hdp_spark.errors import ParameterError, SchemaError

__all__ = ["KeysLike", "numeric_column", "public_keys"]

KeysLike = Sequence[object] | pd.DataFrame | None


def numeric_column(df: pd.DataFrame, column: str, role: str) -> npt.NDArray[np.float64]:
    """``df[column]`` as float64 (nulls as NaN); a SchemaError if missing or not numeric."""
    if column not in df.columns:
        msg = f"{role} column `{column}` is not in the table."
        raise SchemaError(msg)
    series = df[column]
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        msg = f"{role} column `{column}` must be numeric, got dtype {series.dtype}."
        raise SchemaError(msg)
    out: npt.NDArray[np.float64] = series.to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def public_keys(keys: KeysLike, by: tuple[str, ...]) -> tuple[tuple[object, ...], ...] | None:
    """The public key set of a grouped release as normalized tuples (None when global).

    Privacy: the keys come from the caller, never from the data, so a grouped release does
    not reveal which keys exist.
    """
    if not by:
        if keys is not None:
            msg = "`keys` needs `by`: a global release has no group keys."
            raise ParameterError(msg)
        return None
    if keys is None:
        msg = (
            "a grouped release needs `keys`, the public key set: releasing the keys found "
            "in the data would reveal which keys exist."
        )
        raise ParameterError(msg)
    if isinstance(keys, pd.DataFrame):
        missing = [c for c in by if c not in keys.columns]
        if missing:
            msg = f"`keys` must have the `by` columns; missing {missing!r}."
            raise ParameterError(msg)
        keys = list(keys[list(by)].itertuples(index=False, name=None))
    if isinstance(keys, str | bytes):
        msg = "`keys` must be a list of keys or a DataFrame, got a string."
        raise ParameterError(msg)
    return normalize_keys(list(keys), len(by))
