"""Spark native cells of the mean: the per-(group, ε level) count and encoded sums.

The release itself is :mod:`hdp_spark.core.pipeline` (``agg`` in :mod:`hdp_spark.front.release`).

With the JVM extension (see :mod:`hdp_spark.spark.columns`), one ``hdp_cells`` aggregate
per plan (level rules and encoding inside it). Otherwise one Spark action per plan:
``groupBy(by..., ε).agg(count, sum...)`` over native
expressions, collected to the driver (its size is #groups x #distinct ε, never #rows).
Exact levels group by the raw ε and apply the level rules to the distinct values on the
driver; an ``EpsGrid`` rounds per row first. A grouped release matches its public keys on
the collected cells (or, for large key sets or tables, with a broadcast semi-join in Spark:
see :func:`hdp_spark.spark._common.collect_cells_arrow`). The tables are
:class:`~hdp_spark.core.level_table.LevelTable` columns read from the collected Arrow cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.level_table import LevelTable
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.release import LevelPlan
from hdp_spark.errors import InternalError
from hdp_spark.spark._common import collect_cell_groups, dataframe_schema, field
from hdp_spark.spark.columns import native_cells
from hdp_spark.spark.expressions import encode_sql, with_level
from hdp_spark.spark.extension import native_ready
from hdp_spark.spark.sql_text import ident

__all__ = ["level_tables"]


def level_tables(
    df: DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[LevelTable]:
    """The per-(group, ε level) tables of each plan (count and encoded sums), as columns
    read from the collected Arrow cells (no Python object per cell)."""
    schema = dataframe_schema(df)
    by_fields = [field(schema, c, "group", numeric=False) for c in by]
    for plan in plans:
        field(schema, plan.eps, "ε", numeric=True)
        for spec in plan.specs:
            field(schema, spec.column, "value", numeric=True)
    types = {f.name: f for f in schema.fields}
    if plans and native_ready(df.sparkSession):
        return [_native_table(df, plan, by, by_fields, keys) for plan in plans]
    tables = []
    for plan in plans:
        # One SQL string per column (see hdp_spark.spark.sql_text: a chain of Column calls
        # cost ~1 ms of JVM round trips each, tens of ms per release).
        sums = [
            F.expr(
                "sum("
                + encode_sql(
                    s.column, s.lower, s.upper, s.fill_value,
                    nullable=types[s.column].nullable,
                    floating=isinstance(types[s.column].dataType, T.FloatType | T.DoubleType),
                )
                + f") AS __q{i}"
            )
            for i, s in enumerate(plan.specs)
        ]
        # Exact levels: group by the raw ε (as double) and apply the level rules to the
        # collected distinct values on the driver. Grouping by raw ε refines grouping by
        # level (the level is a function of it), so merging the cells (LevelTable does)
        # gives the same table as a per-row level expression, without evaluating one per
        # row. A grid maps continuous ε to few levels: there the per-row expression keeps
        # the table small.
        exact = plan.grid is None
        if exact:
            src, level_col = df, F.expr(f"CAST({ident(plan.eps)} AS DOUBLE) AS __level")
        else:
            src, level_col = with_level(df, plan.eps, plan.grid, "__level"), F.expr("__level")
        cells_df = src.groupBy(*[F.expr(ident(c)) for c in by], level_col).agg(
            F.expr("count(1) AS __n"), *sums
        )
        group_of, group_keys, table = collect_cell_groups(cells_df, by_fields, keys)
        # null -> NaN: both are invalid ε
        levels = _numbers(table.column("__level"), np.float64)
        if exact:
            levels = levels_numpy(levels, None)
        totals = np.zeros((table.num_rows, len(plan.specs)), dtype=np.int64)
        for i in range(len(plan.specs)):
            totals[:, i] = _numbers(table.column(f"__q{i}"), np.int64)
        tables.append(LevelTable.from_cells(plan.eps, group_keys, group_of, levels,
                                            _numbers(table.column("__n"), np.int64), totals))
    return tables


def _native_table(
    df: DataFrame,
    plan: LevelPlan,
    by: tuple[str, ...],
    by_fields: list[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> LevelTable:
    """One plan's table through the native ``hdp_cells`` aggregate: one pass, the level
    rules and the encoding inside it (the same cells as the ``groupBy(ε)`` pass), read
    from the struct's flat list arrays."""
    values = tuple((s.column, s.lower, s.upper, s.fill_value) for s in plan.specs)
    cells_df = df.groupBy(*[F.expr(ident(c)) for c in by]).agg(
        native_cells(plan.eps, plan.grid, values=values).alias("__c"))
    group_of, group_keys, table = collect_cell_groups(cells_df, by_fields, keys)
    cells = table.column("__c").combine_chunks()
    if cells.null_count:
        msg = "the native cells aggregate returned a null row"
        raise InternalError(msg)
    level = cells.field("level")
    lengths = level.value_lengths().to_numpy(zero_copy_only=False)
    k = len(plan.specs)
    sums = _numbers(cells.field("sums").flatten(), np.int64).reshape(-1, k) if k else (
        np.zeros((int(lengths.sum()), 0), dtype=np.int64))
    return LevelTable.from_cells(
        plan.eps, group_keys, np.repeat(group_of, lengths),
        _numbers(level.flatten(), np.float64), _numbers(cells.field("n").flatten(), np.int64),
        sums)


def _numbers(column: pa.Array | pa.ChunkedArray, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A numeric Arrow column as numpy (a null float is NaN: an invalid ε level)."""
    if dtype is np.float64:
        return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False),
                          dtype=np.float64)
    if column.null_count:
        msg = "a cell count or sum came back null from Spark"
        raise InternalError(msg)
    return np.asarray(column.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
