"""Plumbing shared by the Spark backend's aggregators: column checks and public key sets."""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from hdp_spark.core.keys import (
    KEYS_FROM_DATA_MESSAGE,
    check_key_columns,
    normalize_key,
    public_keys,
)
from hdp_spark.core.output_columns import ListColumn, OutputColumns
from hdp_spark.errors import ParameterError, SchemaError

__all__ = [
    "INTEGRAL",
    "NUMERIC",
    "KeysLike",
    "check_key_types",
    "check_keys_not_derived",
    "coerce_keys",
    "collect_cell_groups",
    "collect_cells",
    "collect_cells_arrow",
    "field",
    "group_codes",
    "is_dataframe",
    "key_frame",
    "key_table_rows",
    "local_frame",
    "mark_unsafe",
]

UNSAFE_SEED_MARK = "hdp_unsafe_seed"
"""Field metadata key of every output column of a release made with ``unsafe_seed``."""

KeysLike = Collection[object] | DataFrame | pd.DataFrame | None
"""A public key set: a list, tuple, set or array of keys (tuples for several ``by``
columns), or a Spark (classic or Connect) or pandas DataFrame with the ``by`` columns. It
must come from outside the data (see :func:`check_keys_not_derived`)."""

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


def key_table_rows(keys: object, by: tuple[str, ...]) -> list[tuple[object, ...]] | None:
    """The ``by`` rows of a key table: a Spark DataFrame (collected: the key set is public
    and small) or a pandas DataFrame; None for anything else (see
    :func:`hdp_spark.core.keys.public_keys`)."""
    # A Connect DataFrame answers every attribute name with a Column (``hasattr`` is always
    # True), so it must be recognised as a Spark DataFrame first, and pandas by its type.
    kdf: Any = keys
    if is_dataframe(keys):
        check_key_columns(kdf.columns, by)
        return [tuple(r) for r in kdf.select(*by).collect()]
    if isinstance(keys, pd.DataFrame):
        check_key_columns(kdf.columns, by)
        return list(kdf[list(by)].itertuples(index=False, name=None))
    return None


MAX_PLAN_NODES = 10_000
"""Most nodes of a key DataFrame's plan searched for the input's plan."""


def _connect_children(node: object) -> list[object]:
    """The child plans of a Spark Connect plan node (any attribute holding plans)."""
    out: list[object] = []
    for value in vars(node).values():
        items = value if isinstance(value, list | tuple) else (value,)
        out.extend(v for v in items if _is_connect_plan(v))
    return out


def _is_connect_plan(obj: object) -> bool:
    return any(
        c.__name__ == "LogicalPlan" and c.__module__ == "pyspark.sql.connect.plan"
        for c in type(obj).__mro__
    )


def _connect_contains(keys: Any, df: Any) -> bool:
    """Whether the Connect plan of ``keys`` has the plan of ``df`` as a subtree.

    A Connect DataFrame derived from ``df`` (``df.select(...).distinct()``, a join, a
    union...) holds ``df``'s client-side plan object as a descendant.
    """
    target = getattr(df, "_plan", None)
    root = getattr(keys, "_plan", None)
    if target is None or root is None:
        return False
    stack, seen = [root], 0
    while stack and seen < MAX_PLAN_NODES:
        node = stack.pop()
        seen += 1
        if node is target:
            return True
        stack.extend(_connect_children(node))
    return False


def _classic_contains(keys: Any, df: Any) -> bool:
    """Whether the analyzed plan of ``keys`` has a subtree with the same result as the
    analyzed plan of ``df`` (Catalyst's ``sameResult``: canonical plans compared, so
    attribute ids and aliases do not matter; temporary views are inlined)."""
    target = df._jdf.queryExecution().analyzed()
    stack, seen = [keys._jdf.queryExecution().analyzed()], 0
    while stack and seen < MAX_PLAN_NODES:
        node = stack.pop()
        seen += 1
        if node.sameResult(target):
            return True
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return False


def check_keys_not_derived(df: object, keys: object) -> None:
    """Reject a key set that is detectably derived from the input table ``df``.

    Detected: ``keys`` is ``df`` itself, or a Spark DataFrame whose plan contains the
    input's plan (``df.select("dept").distinct()``, ``df.groupBy("dept").count()``, a join
    or union with ``df``, a temporary view of ``df`` queried with SQL on classic Spark).
    Classic Spark compares analyzed plans with Catalyst's ``sameResult``; Spark Connect
    looks for the input's client-side plan in the keys' plan. Not detectable: keys
    collected to Python and passed as a list, keys written out and read back, checkpoints,
    or (Connect) SQL text over a view of the input. The check reads plans only, never data.

    Raises:
        ParameterError: the key set is derived from ``df``.
    """
    if keys is df:
        raise ParameterError(KEYS_FROM_DATA_MESSAGE.format(how="`keys` is the input table"))
    if not (is_dataframe(keys) and is_dataframe(df)):
        return
    connect = type(keys).__module__.startswith("pyspark.sql.connect")
    if connect != type(df).__module__.startswith("pyspark.sql.connect"):
        return
    derived = _connect_contains(keys, df) if connect else _classic_contains(keys, df)
    if derived:
        how = "the plan of `keys` contains the plan of the input"
        raise ParameterError(KEYS_FROM_DATA_MESSAGE.format(how=how))


def _local_naive(value: object) -> object:
    """A timezone-aware datetime as the naive local time PySpark uses for timestamps.

    ``collect()`` returns, and ``createDataFrame`` reads, TimestampType values as naive
    datetimes in the local time zone, while Arrow returns UTC-aware ones: without this a
    collected timestamp key would not equal the caller's public key and its group would be
    released as empty.
    """
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value


def coerce_keys(
    schema: T.StructType, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...]
) -> tuple[tuple[object, ...], ...]:
    """Public keys in the Python types Spark expects for their columns.

    ``1`` for a double column becomes ``1.0`` and ``2.0`` for an integer column becomes
    ``2``, as pandas matches them; Spark's createDataFrame would reject them otherwise.
    Timezone-aware datetimes become naive local times (see :func:`_local_naive`).
    """
    types = {f.name: f.dataType for f in schema.fields}

    def coerce(value: object, dtype: object) -> object:
        if isinstance(value, bool):
            return value
        if isinstance(dtype, T.FloatType | T.DoubleType) and isinstance(value, int):
            return float(value)
        if isinstance(dtype, INTEGRAL) and isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(dtype, T.TimestampType):
            return _local_naive(value)
        return value

    return tuple(tuple(coerce(v, types.get(c)) for v, c in zip(k, by, strict=True)) for k in keys)


_ARROW_KEY_TYPES = (*INTEGRAL, T.FloatType, T.DoubleType, T.StringType, T.BooleanType)
_ARROW_OUTPUT_TYPES = (*_ARROW_KEY_TYPES, T.DateType)
"""Types whose Arrow values are plain Python values with no time zone involved."""


def key_frame(
    session: Any, by_fields: Sequence[T.StructField], keys: tuple[tuple[object, ...], ...]
) -> DataFrame:
    """The public key set as a small Spark DataFrame typed like the ``by`` columns.

    Built from an Arrow table when every key column has a plain type (a local relation, no
    Python-side row conversion); other types (dates, timestamps, decimals) go through rows.

    Raises:
        ParameterError: a key does not have the type of its column.
    """
    key_schema = T.StructType([T.StructField(f.name, f.dataType, False) for f in by_fields])
    try:
        table = _arrow_keys(key_schema, keys)
        if table is not None:
            return session.createDataFrame(table, schema=key_schema)  # type: ignore[no-any-return]
        return session.createDataFrame(  # type: ignore[no-any-return]
            [list(k) for k in keys], schema=key_schema
        )
    except (TypeError, ValueError, OverflowError, pa.ArrowException):
        # a key of the wrong type (was a raw PySparkTypeError / ArrowTypeError)
        raise _key_type_error(by_fields) from None


def _arrow_keys(key_schema: T.StructType, keys: tuple[tuple[object, ...], ...]) -> Any:
    """The keys as an Arrow table typed by ``key_schema``, or None for non-plain types."""
    if not all(isinstance(f.dataType, _ARROW_KEY_TYPES) for f in key_schema.fields):
        return None
    for i, f in enumerate(key_schema.fields):
        # pyarrow would silently truncate 1.5 into an integer column: check types first
        if not all(_plain_type_ok(f.dataType, k[i]) for k in keys):
            raise TypeError(f.name)
    arrow_schema = to_arrow_schema(key_schema)
    columns = [
        pa.array([k[i] for k in keys], type=arrow_schema.field(i).type)
        for i in range(len(key_schema.fields))
    ]
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def _plain_type_ok(dtype: T.DataType, value: object) -> bool:
    if isinstance(dtype, T.BooleanType):
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if isinstance(dtype, INTEGRAL):
        return isinstance(value, int)  # integral floats were made ints by coerce_keys
    if isinstance(dtype, T.FloatType | T.DoubleType):
        return isinstance(value, int | float)
    return isinstance(value, str)  # StringType


def _key_type_error(by_fields: Sequence[T.StructField]) -> ParameterError:
    types = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in by_fields)
    return ParameterError(f"every key in `keys` must have the type of its `by` column ({types}).")


def check_key_types(
    session: Any, by_fields: Sequence[T.StructField], keys: tuple[tuple[object, ...], ...]
) -> None:
    """Reject a public key whose Python type does not fit its ``by`` column.

    Plain types are checked by building their Arrow arrays (no Spark call); other types by
    building the key DataFrame, whose row verifier checks them.

    Raises:
        ParameterError: a key does not have the type of its column.
    """
    key_schema = T.StructType([T.StructField(f.name, f.dataType, False) for f in by_fields])
    try:
        if _arrow_keys(key_schema, keys) is None:
            key_frame(session, by_fields, keys)
    except (TypeError, ValueError, OverflowError, pa.ArrowException):
        raise _key_type_error(by_fields) from None


DRIVER_FILTER_MAX_KEYS = 10_000
"""Public key sets up to this size are matched on the driver (see :func:`collect_cells`)."""

DRIVER_FILTER_MAX_CELLS = 1_000_000
"""Most aggregated cells collected before falling back to a Spark-side key filter."""


def collect_cells(
    cells_df: DataFrame,
    by_fields: Sequence[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> tuple[list[tuple[object, ...]], dict[str, list[Any]]]:
    """:func:`collect_cells_arrow` with the other columns as Python lists."""
    found, table = collect_cells_arrow(cells_df, by_fields, keys)
    return found, {name: table.column(name).to_pylist() for name in table.column_names}


def collect_cells_arrow(
    cells_df: DataFrame,
    by_fields: Sequence[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> tuple[list[tuple[object, ...]], pa.Table]:
    """Collect an aggregated cell table, keeping only the cells of public keys.

    Returns the group key of every kept cell and the other columns as an Arrow table.

    The cells are already aggregated (one row per group x level x ...), so the key filter
    runs on them, never on input rows. A small public key set is matched on the driver
    (a Spark join would add a broadcast job to every release) as long as the table has at
    most :data:`DRIVER_FILTER_MAX_CELLS` cells, checked with a ``limit`` in the same job; a
    larger key set, or a table with more cells (many keys outside the public set), is
    filtered by a broadcast semi-join in Spark so the driver never holds them.

    Privacy: the filter only decides which cells the trusted driver sees; keys outside the
    public set never reach a release either way.
    """
    table = _collected(cells_df, by_fields, keys)
    by = [f.name for f in by_fields]
    if by:
        key_columns = []
        for f in by_fields:
            values = table.column(f.name).to_pylist()
            if not isinstance(f.dataType, _ARROW_OUTPUT_TYPES):  # Arrow gives plain values
                values = [_local_naive(normalize_key(v)) for v in values]
            key_columns.append(values)
        table = table.drop_columns(by)
        found = list(zip(*key_columns, strict=True))
    else:
        found = [()] * table.num_rows
    if keys is None:
        return found, table
    public = set(keys)
    keep = [j for j, key in enumerate(found) if key in public]
    if len(keep) == len(found):
        return found, table
    return [found[j] for j in keep], table.take(pa.array(keep, type=pa.int64()))


def _collected(cells_df: DataFrame, by_fields: Sequence[T.StructField],
               keys: tuple[tuple[object, ...], ...] | None) -> pa.Table:
    """The cell table as Arrow, filtered to public keys in Spark when it is large (see
    :func:`collect_cells_arrow`); the exact key filter follows on the driver."""
    by = [f.name for f in by_fields]
    table = None
    if keys is not None:
        check_key_types(cells_df.sparkSession, by_fields, keys)
    if keys is not None and len(keys) <= DRIVER_FILTER_MAX_KEYS:
        table = cells_df.limit(DRIVER_FILTER_MAX_CELLS + 1).toArrow()
        if table.num_rows > DRIVER_FILTER_MAX_CELLS:
            table = None
    if table is None:
        if keys is not None:
            key_df = key_frame(cells_df.sparkSession, by_fields, keys)
            cells_df = cells_df.join(F.broadcast(key_df), on=by, how="left_semi")
        table = cells_df.toArrow()
    return table


_CODED_KEY_TYPES = (*INTEGRAL, T.StringType, T.BooleanType, T.DateType)
"""Key types whose Arrow equality is Python's equality of their values (no float: Arrow's
hashing tells -0.0 from 0.0 and matches NaNs, a Python tuple does neither)."""


def collect_cell_groups(
    cells_df: DataFrame,
    by_fields: Sequence[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> tuple[npt.NDArray[np.int64], list[tuple[object, ...]], pa.Table]:
    """:func:`collect_cells_arrow` with each kept cell's group as a code: ``(group_of,
    group_keys, table)``, where cell j belongs to ``group_keys[group_of[j]]`` and the keys
    are in order of first appearance (the codes of the tuples ``collect_cells_arrow``
    returns, equal to them). One key column of a type in :data:`_CODED_KEY_TYPES` is coded
    by Arrow (``dictionary_encode``) and only its distinct values are checked against the
    public keys, instead of one Python tuple and one set lookup per cell.

    Privacy: as :func:`collect_cells_arrow` (the same cells kept, the same keys).
    """
    if len(by_fields) != 1 or not isinstance(by_fields[0].dataType, _CODED_KEY_TYPES):
        found, table = collect_cells_arrow(cells_df, by_fields, keys)
        return (*group_codes(found), table)
    table = _collected(cells_df, by_fields, keys)
    name = by_fields[0].name
    encoded = table.column(name).combine_chunks().dictionary_encode(null_encoding="encode")
    table = table.drop_columns([name])
    group_keys: list[tuple[object, ...]] = [(v,) for v in encoded.dictionary.to_pylist()]
    group_of = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if keys is None:
        return group_of, group_keys, table
    public = set(keys)
    ok = np.fromiter((k in public for k in group_keys), dtype=bool, count=len(group_keys))
    if ok.all():
        return group_of, group_keys, table
    keep = np.flatnonzero(ok[group_of])
    recode = np.cumsum(ok) - 1  # a kept group's new code, in the same order
    return (recode[group_of[keep]].astype(np.int64),
            [k for k, kept in zip(group_keys, ok.tolist(), strict=True) if kept],
            table.take(pa.array(keep, type=pa.int64())))


def group_codes(found: Sequence[tuple[object, ...]]
                ) -> tuple[npt.NDArray[np.int64], list[tuple[object, ...]]]:
    """A code per cell's group key (in order of first appearance) and the keys."""
    code: dict[tuple[object, ...], int] = {}
    setdefault = code.setdefault
    group_of = np.fromiter((setdefault(key, len(code)) for key in found), dtype=np.int64,
                           count=len(found))
    return group_of, list(code)


def _arrow_safe(dtype: T.DataType) -> bool:
    """True for types whose Python values Arrow converts exactly as Spark's row path does
    (no time zone involved: TimestampType values go through rows)."""
    if isinstance(dtype, T.ArrayType):
        return _arrow_safe(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return all(_arrow_safe(f.dataType) for f in dtype.fields)
    return isinstance(dtype, _ARROW_OUTPUT_TYPES)


def local_frame(session: Any, rows: list[tuple[Any, ...]] | OutputColumns,
                schema: T.StructType) -> DataFrame:
    """A DataFrame of released rows built on the driver.

    The rows come from the finalize step with the schema's exact Python types (keys were
    type-checked on entry). On classic PySpark they are sent as one Arrow table, which
    Spark keeps as a local relation (below ``spark.sql.execution.arrow.localRelationThreshold``,
    48 MB by default): a later ``collect()`` or ``show()`` runs no Spark job (the row path
    made an RDD whose every action launched tasks, ~0.1 s). Types that involve a time zone
    (timestamp keys) use the row path, without PySpark's per-value verification. Spark
    Connect sends Arrow itself. Rows given as :class:`OutputColumns` go to Arrow column by
    column (a list-of-structs column from its flat lists, no dict per item).
    """
    if type(session).__module__.startswith("pyspark.sql.connect"):
        data = rows.rows() if isinstance(rows, OutputColumns) else rows
        return session.createDataFrame(data, schema=schema)  # type: ignore[no-any-return]
    if all(_arrow_safe(f.dataType) for f in schema.fields):
        arrow_schema = to_arrow_schema(schema)
        if isinstance(rows, OutputColumns):
            columns = [arrow_column(c, arrow_schema.field(i).type)
                       for i, c in enumerate(rows.columns)]
        else:
            columns = [
                pa.array([r[i] for r in rows], type=arrow_schema.field(i).type)
                for i in range(len(schema.fields))
            ]
        table = pa.Table.from_arrays(columns, schema=arrow_schema)
        return session.createDataFrame(table, schema=schema)  # type: ignore[no-any-return]
    return session.createDataFrame(  # type: ignore[no-any-return]
        rows.rows() if isinstance(rows, OutputColumns) else rows, schema=schema,
        verifySchema=False,
    )


def arrow_column(column: list[Any] | ListColumn, dtype: pa.DataType) -> pa.Array:
    """One output column as an Arrow array of ``dtype`` (a ``ListColumn`` as a list of
    structs over its flat field arrays, fields by name): the release API's output frame and
    the Column's finalize build their arrays here.

    Privacy:
        None: released values in another layout.
    """
    if not isinstance(column, ListColumn):
        return pa.array(column, type=dtype)
    item = dtype.value_type
    values = pa.StructArray.from_arrays(
        [pa.array(column.fields[f.name], type=f.type) for f in item], fields=list(item))
    return pa.ListArray.from_arrays(pa.array(column.offsets, type=pa.int32()), values,
                                    type=dtype)


def mark_unsafe(frame: DataFrame, unsafe: bool) -> DataFrame:
    """Mark every column of a released frame made with ``unsafe_seed``.

    Adds ``{"hdp_unsafe_seed": true}`` to each field's metadata (a projection with
    ``alias(metadata=...)``: the values, column names and types are unchanged, and a frame
    built from a local relation stays one, so reading it runs no job). Field metadata
    survives ``select`` and parquet round trips. Without a seed the frame is returned as is.
    """
    if not unsafe:
        return frame
    return frame.select(*[
        frame[f.name].alias(f.name, metadata={**f.metadata, UNSAFE_SEED_MARK: True})
        for f in frame.schema.fields
    ])


def release_keys(
    df: object, keys: KeysLike, by: tuple[str, ...]
) -> tuple[tuple[object, ...], ...] | None:
    """The public key set of a release on ``df``: normalized, and coerced to the Python
    types of its columns (see :func:`coerce_keys`; impossible types are rejected where the
    keys meet the data, :func:`check_key_types`).

    Raises:
        ParameterError: see :func:`check_keys_not_derived` and
            :func:`hdp_spark.core.keys.public_keys`.
    """
    if keys is not None:
        check_keys_not_derived(df, keys)
    key_t = public_keys(keys, by, key_table_rows)
    if key_t is not None and is_dataframe(df):
        key_t = coerce_keys(df.schema, by, key_t)  # type: ignore[attr-defined]
    return key_t


def dataframe_schema(df: object) -> T.StructType:
    """``df.schema`` of a Spark DataFrame (classic or Connect).

    Raises:
        ParameterError: ``df`` is not a Spark DataFrame.
    """
    if not is_dataframe(df):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    schema: T.StructType = df.schema  # type: ignore[attr-defined]
    return schema
