"""Spark implementation of the per-(group, ε level) statistics and of ``agg``.

One Spark action per release: ``groupBy(by..., level).agg(count, sum...)`` over native
expressions, collected to the driver (its size is #groups x #levels, never #rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.keys import normalize_by, normalize_key, normalize_keys
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.release import (
    AggSpec,
    LevelPlan,
    ReleaseResult,
    finalize_release,
    plan_levels,
)
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.spark.expressions import encode_expr, level_expr

__all__ = ["agg", "level_tables", "release"]

KeysLike = Sequence[object] | DataFrame | None

_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
            T.DecimalType)


def _is_dataframe(obj: object) -> bool:
    return type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("pyspark")


def _field(schema: T.StructType, column: str, role: str, numeric: bool) -> T.StructField:
    for f in schema.fields:
        if f.name == column:
            if numeric and not isinstance(f.dataType, _NUMERIC):
                msg = f"{role} column `{column}` must be numeric, got {f.dataType.simpleString()}."
                raise SchemaError(msg)
            return f
    msg = f"{role} column `{column}` is not in the table."
    raise SchemaError(msg)


def _keys(keys: KeysLike, by: tuple[str, ...]) -> tuple[tuple[object, ...], ...] | None:
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
    if _is_dataframe(keys):
        kdf: Any = keys
        missing = [c for c in by if c not in kdf.columns]
        if missing:
            msg = f"`keys` must have the `by` columns; missing {missing!r}."
            raise ParameterError(msg)
        keys = [tuple(r) for r in kdf.select(*by).collect()]
    elif hasattr(keys, "columns") and hasattr(keys, "itertuples"):  # a pandas key frame
        pkeys: Any = keys
        keys = list(pkeys[list(by)].itertuples(index=False, name=None))
    if isinstance(keys, str | bytes):
        msg = "`keys` must be a list of keys or a DataFrame, got a string."
        raise ParameterError(msg)
    return normalize_keys(list(keys), len(by))  # type: ignore[arg-type]


def level_tables(
    df: DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], GroupStats]]:
    """The per-(group, ε level) tables of each plan (count and encoded sums)."""
    if not _is_dataframe(df):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    schema = df.schema
    by_fields = [_field(schema, c, "group", numeric=False) for c in by]
    for plan in plans:
        _field(schema, plan.eps, "ε", numeric=True)
        for spec in plan.specs:
            _field(schema, spec.column, "value", numeric=True)
    if keys is not None:
        key_schema = T.StructType([T.StructField(f.name, f.dataType, False) for f in by_fields])
        key_df = df.sparkSession.createDataFrame([list(k) for k in keys], schema=key_schema)
        df = df.join(F.broadcast(key_df), on=list(by), how="left_semi")
    tables = []
    for plan in plans:
        sums = [
            F.sum(encode_expr(s.column, s.lower, s.upper, s.fill_value)).alias(f"__q{i}")
            for i, s in enumerate(plan.specs)
        ]
        rows = (
            df.select(*[F.col(c) for c in by], level_expr(plan.eps, plan.grid).alias("__level"),
                      *[F.col(s.column) for s in plan.specs])
            .groupBy(*by, "__level")
            .agg(F.count(F.lit(1)).alias("__n"), *sums)
            .collect()
        )
        width = len(by)
        cells = [
            (
                tuple(normalize_key(k) for k in tuple(r)[:width]),
                float(r["__level"]),
                int(r["__n"]),
                [int(r[f"__q{i}"]) for i in range(len(plan.specs))],
            )
            for r in rows
        ]
        tables.append(build_groups(plan.eps, cells))
    return tables


def release(
    df: DataFrame,
    *specs: AggSpec,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
) -> ReleaseResult:
    """Run one release on a Spark DataFrame and return the engine-neutral result."""
    by_t = normalize_by(by)
    key_t = _keys(keys, by_t)
    plans = plan_levels(specs)
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
) -> DataFrame:
    """Release heterogeneous-DP aggregates of a Spark DataFrame.

    Same arguments and output columns as :func:`hdp_spark.pandas.agg`. Runs one Spark job
    and returns a DataFrame built from the released rows: ``show()`` then ``collect()``
    return the same numbers, because nothing downstream re-runs the mechanism.

    Privacy:
        Each call is one release with fresh noise. See :func:`hdp_spark.hdp_mean`.
    """
    result = release(df, *specs, by=by, keys=keys, unsafe_seed=unsafe_seed)
    schema = _output_schema(df, result)
    rows = [tuple(r[f.name] for f in schema.fields) for r in result.rows()]
    return df.sparkSession.createDataFrame(rows, schema=schema)
