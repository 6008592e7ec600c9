"""Spark implementation of the per-(group, ε level) statistics and of ``agg``.

One Spark action per plan: ``groupBy(by..., ε).agg(count, sum...)`` over native
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

from hdp_spark.core.keys import normalize_by
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.release import (
    AggSpec,
    LevelPlan,
    ReleaseResult,
    finalize_release,
    plan_levels,
)
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.spark._common import (
    KeysLike,
    collect_cells,
    dataframe_schema,
    field,
    local_frame,
    mark_unsafe,
    release_keys,
)
from hdp_spark.spark.expressions import encode_sql, with_level
from hdp_spark.spark.schema import check_release
from hdp_spark.spark.sql_text import ident

__all__ = ["agg", "level_tables", "release"]


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
        totals_rows = list(zip(*sum_cols, strict=True))
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


def release(
    df: DataFrame,
    *specs: AggSpec,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> ReleaseResult:
    """Run one release on a Spark DataFrame and return the engine-neutral result."""
    by_t = normalize_by(by, specs)
    key_t = release_keys(df, keys, by_t)
    plans = plan_levels(specs)
    if schema is not None:
        check_release(df, schema, specs, by_t)  # one extra aggregate job, counts only
    tables = level_tables(df, plans, by_t, key_t)
    return finalize_release(specs, plans, tables, by_t, key_t, ReleaseKey.resolve(unsafe_seed))


_LEVELS_TYPE = T.ArrayType(
    T.StructType(
        [
            T.StructField("eps", T.DoubleType()),
            T.StructField("n", T.LongType()),
            T.StructField("weight", T.DoubleType()),
            T.StructField("eps_effective", T.DoubleType()),
        ]
    )
)


def _output_schema(df: DataFrame, result: ReleaseResult) -> T.StructType:
    fields = [
        T.StructField(f.name, f.dataType, True)
        for c in result.by
        for f in df.schema.fields
        if f.name == c
    ]
    for spec in result.specs:
        p = spec.name
        fields += [
            T.StructField(p, T.DoubleType()),
            T.StructField(p + "_noise_scale", T.DoubleType()),
            T.StructField(p + "_ci_low", T.DoubleType()),
            T.StructField(p + "_ci_high", T.DoubleType()),
            T.StructField(p + "_n", T.LongType()),
            T.StructField(p + "_tau", T.DoubleType()),
            T.StructField(p + "_method", T.StringType()),
            T.StructField(p + "_fallback", T.BooleanType()),
            T.StructField(p + "_eps_levels", _LEVELS_TYPE),
        ]
    return T.StructType(fields)


def agg(
    df: DataFrame,
    *specs: AggSpec,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> DataFrame:
    """Release heterogeneous-DP aggregates of a Spark DataFrame.

    Same arguments and output columns as :func:`hdp_spark.pandas.agg`. Runs one Spark job
    (two with ``schema``: the validation pass, counts only, comes first) and returns a
    DataFrame built from the released rows: ``show()`` then ``collect()`` return the same
    numbers, because nothing downstream re-runs the mechanism.

    Privacy:
        Each call is one release with fresh noise. See :func:`hdp_spark.hdp_mean`.
    """
    result = release(df, *specs, by=by, keys=keys, unsafe_seed=unsafe_seed, schema=schema)
    out_schema = _output_schema(df, result)
    rows = [tuple(r[f.name] for f in out_schema.fields) for r in result.rows()]
    return mark_unsafe(local_frame(df.sparkSession, rows, out_schema), result.unsafe_seed)
