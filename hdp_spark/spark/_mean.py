"""Spark implementation of the per-(group, ε level) statistics and of ``agg``.

One Spark action per release: ``groupBy(by..., level).agg(count, sum...)`` over native
expressions, collected to the driver (its size is #groups x #levels, never #rows).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.keys import normalize_by, normalize_key
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
from hdp_spark.errors import ParameterError
from hdp_spark.spark._common import INTEGRAL, KeysLike, field, is_dataframe, public_keys
from hdp_spark.spark.expressions import encode_expr, level_expr
from hdp_spark.spark.schema import check_release

__all__ = ["agg", "level_tables", "release"]


def _coerce_keys(
    schema: T.StructType, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...]
) -> tuple[tuple[object, ...], ...]:
    """Public keys in the Python types Spark expects for their columns.

    ``1`` for a double column becomes ``1.0`` and ``2.0`` for an integer column becomes
    ``2``, as pandas matches them; Spark's createDataFrame would reject them otherwise.
    """
    types = {f.name: f.dataType for f in schema.fields}

    def coerce(value: object, dtype: object) -> object:
        if isinstance(value, bool):
            return value
        if isinstance(dtype, T.FloatType | T.DoubleType) and isinstance(value, int):
            return float(value)
        if isinstance(dtype, INTEGRAL) and isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    return tuple(tuple(coerce(v, types.get(c)) for v, c in zip(k, by, strict=True)) for k in keys)


def level_tables(
    df: DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], GroupStats]]:
    """The per-(group, ε level) tables of each plan (count and encoded sums)."""
    if not is_dataframe(df):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    schema = df.schema
    by_fields = [field(schema, c, "group", numeric=False) for c in by]
    for plan in plans:
        field(schema, plan.eps, "ε", numeric=True)
        for spec in plan.specs:
            field(schema, spec.column, "value", numeric=True)
    key_df = None
    if keys is not None:
        key_schema = T.StructType([T.StructField(f.name, f.dataType, False) for f in by_fields])
        try:
            key_df = df.sparkSession.createDataFrame([list(k) for k in keys], schema=key_schema)
        except (TypeError, ValueError):  # a key of the wrong type (was a raw PySparkTypeError)
            types = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in by_fields)
            msg = f"every key in `keys` must have the type of its `by` column ({types})."
            raise ParameterError(msg) from None
    tables = []
    for plan in plans:
        sums = [
            F.sum(encode_expr(s.column, s.lower, s.upper, s.fill_value)).alias(f"__q{i}")
            for i, s in enumerate(plan.specs)
        ]
        cells_df = (
            df.select(*[F.col(c) for c in by], level_expr(plan.eps, plan.grid).alias("__level"),
                      *[F.col(s.column) for s in plan.specs])
            .groupBy(*by, "__level")
            .agg(F.count(F.lit(1)).alias("__n"), *sums)
        )
        if key_df is not None:
            # Keys outside the public set are dropped after the partial aggregation: the
            # semi-join then touches one row per (group, level) cell, not one per row.
            cells_df = cells_df.join(F.broadcast(key_df), on=list(by), how="left_semi")
        table = cells_df.toArrow()
        columns = {name: table.column(name).to_pylist() for name in table.column_names}
        key_cols = [columns[c] for c in by]
        sum_cols = [columns[f"__q{i}"] for i in range(len(plan.specs))]
        cells = [
            (
                tuple(normalize_key(col[j]) for col in key_cols),
                float(columns["__level"][j]),
                int(columns["__n"][j]),
                [int(col[j]) for col in sum_cols],
            )
            for j in range(table.num_rows)
        ]
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
    by_t = normalize_by(by)
    key_t = public_keys(keys, by_t)
    if key_t is not None and is_dataframe(df):
        key_t = _coerce_keys(df.schema, by_t, key_t)
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
    return df.sparkSession.createDataFrame(rows, schema=out_schema)
