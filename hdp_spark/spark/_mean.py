"""Spark native cells of the mean: the per-(group, ε level) count and encoded sums.

The release itself is :mod:`hdp_spark.core.pipeline` (``agg`` in :mod:`hdp_spark.front.release`).

With the JVM extension (see :mod:`hdp_spark.spark.columns`), one ``hdp_cells`` aggregate
per plan (level rules and encoding inside it). Otherwise one Spark action per plan:
``groupBy(by..., ε).agg(count, sum...)`` over native
expressions, collected to the driver (its size is #groups x #distinct ε, never #rows).
Exact levels group by the raw ε and apply the level rules to the distinct values on the
driver; an ``EpsGrid`` rounds per row first. A grouped release matches its public keys on
the collected cells (or, for large key sets or tables, with a broadcast semi-join in Spark:
see :func:`hdp_spark.spark._common.collect_cells`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.release import LevelPlan
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.spark._common import collect_cells, dataframe_schema, field
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
) -> list[dict[tuple[object, ...], GroupStats]]:
    """The per-(group, ε level) tables of each plan (count and encoded sums)."""
    schema = dataframe_schema(df)
    by_fields = [field(schema, c, "group", numeric=False) for c in by]
    for plan in plans:
        field(schema, plan.eps, "ε", numeric=True)
        for spec in plan.specs:
            field(schema, spec.column, "value", numeric=True)
    types = {f.name: f for f in schema.fields}
    tables = []
    if plans and native_ready(df.sparkSession):
        return [_native_table(df, plan, by, by_fields, keys) for plan in plans]
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
        # level (the level is a function of it), so merging the cells below gives the same
        # table as a per-row level expression, without evaluating one per row. A grid maps
        # continuous ε to few levels: there the per-row expression keeps the table small.
        exact = plan.grid is None
        if exact:
            src, level_col = df, F.expr(f"CAST({ident(plan.eps)} AS DOUBLE) AS __level")
        else:
            src, level_col = with_level(df, plan.eps, plan.grid, "__level"), F.expr("__level")
        cells_df = src.groupBy(*[F.expr(ident(c)) for c in by], level_col).agg(
            F.expr("count(1) AS __n"), *sums
        )
        found, columns = collect_cells(cells_df, by_fields, keys)
        sum_cols = [columns[f"__q{i}"] for i in range(len(plan.specs))]
        raw = columns["__level"]
        counts = columns["__n"]
        levels, merge = raw, False
        if exact:
            raw_arr = np.array(raw, dtype=np.float64)  # null -> NaN: both are invalid ε
            level_arr = levels_numpy(raw_arr, None)
            levels = level_arr.tolist()
            # The rules changed no value (no floor, cap or invalid ε): each (key, raw ε)
            # cell is its own level cell, nothing to merge.
            merge = not np.array_equal(level_arr, raw_arr)
        # a counts-only plan (``explain``: no specs) has no sum column
        totals_rows = list(zip(*sum_cols, strict=True)) if sum_cols else [()] * len(counts)
        if not merge:  # a grid (levels come from Spark), or rules that changed no value
            cells_it = zip(found, levels, counts, totals_rows, strict=True)
            tables.append(build_groups(plan.eps, cells_it))
            continue
        merged: dict[tuple[tuple[object, ...], float], tuple[int, list[int]]] = {}
        for key, level, n, totals in zip(found, levels, counts, totals_rows, strict=True):
            cell = (key, float(level))
            if cell in merged:  # several raw ε of one level (floor, cap, invalid values)
                n0, t0 = merged[cell]
                merged[cell] = (n0 + n, [a + b for a, b in zip(t0, totals, strict=True)])
            else:
                merged[cell] = (n, list(totals))
        cells = [(key, level, n, totals) for (key, level), (n, totals) in merged.items()]
        tables.append(build_groups(plan.eps, cells))
    return tables


def _native_table(
    df: DataFrame,
    plan: LevelPlan,
    by: tuple[str, ...],
    by_fields: list[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> dict[tuple[object, ...], GroupStats]:
    """One plan's table through the native ``hdp_cells`` aggregate: one pass, the level
    rules and the encoding inside it (the same cells as the ``groupBy(ε)`` pass)."""
    values = tuple((s.column, s.lower, s.upper, s.fill_value) for s in plan.specs)
    cells_df = df.groupBy(*[F.expr(ident(c)) for c in by]).agg(
        native_cells(plan.eps, plan.grid, values=values).alias("__c"))
    found, columns = collect_cells(cells_df, by_fields, keys)
    k = len(plan.specs)
    cells = [
        (key, level, n, c["sums"][k * i:k * (i + 1)])
        for key, c in zip(found, columns["__c"], strict=True)
        for i, (level, n) in enumerate(zip(c["level"], c["n"], strict=True))
    ]
    return build_groups(plan.eps, cells)
