"""Public group-key sets.

A grouped release must not reveal which keys occur in the data: the caller passes the
public key set, every key in it gets an output row (empty groups included) and rows whose
key is outside the set are left out of the release.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence

from hdp_spark.errors import ParameterError

__all__ = ["normalize_by", "normalize_key", "normalize_keys"]

_PRIMITIVE = (str, int, float, bool, datetime.date, datetime.datetime, decimal.Decimal)


def normalize_by(by: str | Sequence[str] | None) -> tuple[str, ...]:
    """The group-by columns as a tuple (empty for a global release)."""
    if by is None:
        return ()
    cols = (by,) if isinstance(by, str) else tuple(by)
    if not cols or not all(isinstance(c, str) and c for c in cols):
        msg = f"`by` must be a column name or a non-empty list of column names, got {by!r}."
        raise ParameterError(msg)
    if len(set(cols)) != len(cols):
        msg = f"`by` must not repeat a column, got {by!r}."
        raise ParameterError(msg)
    return cols


def normalize_key(value: object) -> object:
    """Turn an engine scalar (numpy scalar, pandas Timestamp) into a plain Python value."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, _PRIMITIVE):
        value = item()
    to_py = getattr(value, "to_pydatetime", None)
    if callable(to_py):
        value = to_py()
    return value


def normalize_keys(keys: Sequence[object], width: int) -> tuple[tuple[object, ...], ...]:
    """Validate a public key list: tuples of ``width`` non-null values, no duplicates."""
    out: list[tuple[object, ...]] = []
    for raw in keys:
        key = tuple(raw) if isinstance(raw, tuple | list) else (raw,)
        key = tuple(normalize_key(k) for k in key)
        if len(key) != width:
            msg = f"every key in `keys` must have {width} value(s), one per `by` column."
            raise ParameterError(msg)
        if any(k is None or (isinstance(k, float) and k != k) for k in key):
            msg = "`keys` must not contain null or NaN values."
            raise ParameterError(msg)
        out.append(key)
    if len(set(out)) != len(out):
        msg = "`keys` must not contain duplicates."
        raise ParameterError(msg)
    if not out:
        msg = "`keys` must contain at least one key."
        raise ParameterError(msg)
    return tuple(out)


def context_key(key: tuple[object, ...]) -> tuple[object, ...]:
    """A key as primitives for the noise context (dates and decimals by their text)."""
    return tuple(
        k if isinstance(k, str | int | float | bool) else f"{type(k).__name__}:{k}" for k in key
    )
