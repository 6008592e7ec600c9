"""Plumbing shared by the Spark backend's aggregators: column checks and public key sets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from hdp_spark.core.keys import normalize_keys
from hdp_spark.errors import ParameterError, SchemaError

__all__ = ["INTEGRAL", "NUMERIC", "KeysLike", "field", "is_dataframe", "public_keys"]

KeysLike = Sequence[object] | DataFrame | None

NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
           T.DecimalType)
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def is_dataframe(obj: object) -> bool:
    """True for a classic or Spark Connect DataFrame (checked by name: no Connect import)."""
    return type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("pyspark")


def field(schema: T.StructType, column: str, role: str, numeric: bool = False) -> T.StructField:
    """The schema field of ``column``; a SchemaError if missing (or, optionally, not numeric)."""
    for f in schema.fields:
        if f.name == column:
            if numeric and not isinstance(f.dataType, NUMERIC):
                msg = f"{role} column `{column}` must be numeric, got {f.dataType.simpleString()}."
                raise SchemaError(msg)
            return f
    msg = f"{role} column `{column}` is not in the table."
    raise SchemaError(msg)


def public_keys(keys: KeysLike, by: tuple[str, ...]) -> tuple[tuple[object, ...], ...] | None:
    """The public key set of a grouped release as normalized tuples (None when global).

    Accepts a list of keys, a Spark DataFrame (collected: the key set is public and small)
    or a pandas DataFrame.

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
    is_pandas = hasattr(keys, "columns") and hasattr(keys, "itertuples")
    if is_dataframe(keys) or is_pandas:
        kdf: Any = keys
        missing = [c for c in by if c not in kdf.columns]
        if missing:
            msg = f"`keys` must have the `by` columns; missing {missing!r}."
            raise ParameterError(msg)
        if is_pandas:
            keys = list(kdf[list(by)].itertuples(index=False, name=None))
        else:
            keys = [tuple(r) for r in kdf.select(*by).collect()]
    if isinstance(keys, str | bytes):
        msg = "`keys` must be a list of keys or a DataFrame, got a string."
        raise ParameterError(msg)
    return normalize_keys(list(keys), len(by))  # type: ignore[arg-type]
