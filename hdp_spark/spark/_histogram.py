"""Spark implementation of the heterogeneous-DP histogram (same API as the pandas backend).

Usage::

    import hdp_spark.spark as hs
    spec = hs.hdp_histogram("diagnosis", eps="eps", categories=["A", "B", "C"])
    hs.histogram(df, spec).show()

One Spark job per release. Per row only native expressions run: the ε (raw for exact
levels, whose rules run on the driver over the distinct values; rounded onto a grid by
:func:`~hdp_spark.spark.expressions.with_level` otherwise) and the category match
``when(value.isin(domain), value)``, which Spark's optimizer turns into a hash-set lookup
(``InSet``) for more than 10 labels; unmatched and null values become null. Then
``groupBy(by..., level, matched value).count()`` and a collect of at most
#groups × #levels × (k + 1) rows. The driver maps each collected label to its code with a
dict lookup, the same equality as the pandas backend (measured alternatives for 100
categories are in ``benchmarks/log/histogram.md``: ``when`` chains, literal maps and
``array_position`` are 2-3x slower; a broadcast join of the domain is ~10% slower).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.histogram.release import (
    HistogramRelease,
    build_histogram_groups,
    check_histogram_options,
)
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernels import HistogramKernel, release_specs
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import SchemaError
from hdp_spark.spark._common import (
    INTEGRAL,
    KeysLike,
    collect_cells,
    dataframe_schema,
    field,
)
from hdp_spark.spark.columns import native_cells, spec_of
from hdp_spark.spark.engine import SparkEngine
from hdp_spark.spark.expressions import with_level
from hdp_spark.spark.extension import native_ready
from hdp_spark.spark.sql_text import ident

__all__ = ["category_expr", "histogram", "histogram_release", "histogram_tables"]

_FRACTIONAL = (T.FloatType, T.DoubleType, T.DecimalType)


def category_expr(schema: T.StructType, spec: HistogramSpec) -> Column:
    """The matched label of each row, or null when it is null or outside the domain.

    String labels need a string column (exact binary equality); integer labels need a
    numeric column: integral columns compare as long, float/double/decimal columns as
    double (2.0 matches 2; NaN and ±inf match nothing). Same rules as the pandas backend.

    Privacy:
        Per-row pre-processing by a public rule; a data value never raises (only the
        column's type, a public schema fact, can).
    """
    f = field(schema, spec.column, "category", numeric=False)
    dt = f.dataType
    col = F.expr(ident(spec.column))  # a top-level name, even with a dot in it
    if spec.kind == "str":
        if not isinstance(dt, T.StringType):
            msg = (
                f"category column `{spec.column}` must hold strings for string `categories`, "
                f"got {dt.simpleString()}."
            )
            raise SchemaError(msg)
        value = col
        domain: list[Any] = list(spec.categories)
    elif isinstance(dt, INTEGRAL):
        value = col.cast("long")
        domain = [int(c) for c in spec.categories]
    elif isinstance(dt, _FRACTIONAL):
        value = col.cast("double")
        domain = [float(c) for c in spec.categories]
    else:
        msg = (
            f"category column `{spec.column}` must be numeric (integer or float) for integer "
            f"`categories`, got {dt.simpleString()}."
        )
        raise SchemaError(msg)
    return F.when(value.isin(domain), value)


def histogram_tables(
    df: DataFrame,
    spec: HistogramSpec,
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> dict[tuple[object, ...], GroupStats]:
    """Per-(group, ε level) tables; each level row's totals count the category codes.

    Privacy:
        NOT a release: the exact pre-noise counts. For tests and the trusted operator only;
        never publish them.
    """
    schema = dataframe_schema(df)
    by_fields = [field(schema, c, "group", numeric=False) for c in by]
    field(schema, spec.eps, "ε", numeric=True)
    matched = category_expr(schema, spec)
    if native_ready(df.sparkSession):
        return _native_histogram(df, spec, by, by_fields, keys)
    # Exact levels: group by the raw ε and apply the level rules to the distinct values on
    # the driver (see hdp_spark.spark._mean.level_tables); a grid needs the per-row rule.
    exact = spec.eps_grid is None
    if exact:
        src, level_col = df, F.expr(f"CAST({ident(spec.eps)} AS DOUBLE) AS __level")
    else:
        src, level_col = with_level(df, spec.eps, spec.eps_grid, "__level"), F.expr("__level")
    # grouping expressions directly (no staging select): fewer JVM round trips per release
    cells_df = src.groupBy(
        *[F.expr(ident(c)) for c in by], level_col, matched.alias("__cat")
    ).agg(F.expr("count(1) AS __n"))
    found, columns = collect_cells(cells_df, by_fields, keys)
    levels = columns["__level"]
    if exact:
        levels = levels_numpy(
            np.array([math.nan if v is None else v for v in levels], dtype=np.float64), None
        ).tolist()
    code_of = spec.code_of()
    unmatched = spec.unmatched_code
    cells = []
    for key, level, label, count in zip(
        found, levels, columns["__cat"], columns["__n"], strict=True
    ):
        code = unmatched if label is None else code_of.get(label, unmatched)
        cells.append((key, float(level), code, int(count)))
    return build_histogram_groups(spec, cells)


def _native_histogram(
    df: DataFrame,
    spec: HistogramSpec,
    by: tuple[str, ...],
    by_fields: list[T.StructField],
    keys: tuple[tuple[object, ...], ...] | None,
) -> dict[tuple[object, ...], GroupStats]:
    """The histogram's cells through the native ``hdp_cells`` aggregate (the category
    matching in Java, with the rules of :func:`category_expr`)."""
    cells_df = df.groupBy(*[F.expr(ident(c)) for c in by]).agg(
        native_cells(spec.eps, spec.eps_grid, spec.column, tuple(spec.categories))
        .alias("__c"))
    found, columns = collect_cells(cells_df, by_fields, keys)
    cells = [
        (key, level, code_, n)
        for key, c in zip(found, columns["__c"], strict=True)
        for level, code_, n in zip(c["level"], c["code"], c["n"], strict=True)
    ]
    return build_histogram_groups(spec, cells)


def histogram_release(
    df: DataFrame,
    spec: HistogramSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    project: bool = False,
    counts: bool = False,
    schema: TableSchema | None = None,
) -> HistogramRelease:
    """Run one histogram release and return the engine-neutral result.

    See :func:`histogram` for the arguments.

    Privacy:
        One release, exactly as :func:`histogram` (fresh noise unless ``unsafe_seed``).
    """
    spec = spec_of(spec)  # type: ignore[assignment]  # a Column aggregator carries its spec
    by_t = normalize_by(by, [spec])
    check_histogram_options(spec, by_t, project, counts)
    r = release_specs(SparkEngine(df), [spec], by=by_t or None, keys=keys, schema=schema,
                      unsafe_seed=unsafe_seed, kernels={0: HistogramKernel(project)})
    return HistogramRelease(r.by, r.keys, spec, r.results[spec.name], project, counts,
                            r.unsafe_seed)


def histogram(
    df: DataFrame,
    spec: HistogramSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    project: bool = False,
    counts: bool = False,
    schema: TableSchema | None = None,
) -> DataFrame:
    """Release a heterogeneous-DP histogram of a Spark DataFrame.

    Same arguments and output columns as :func:`hdp_spark.pandas.histogram`. Runs one
    Spark job and returns a DataFrame built from the released rows: ``show()`` then
    ``collect()`` return the same numbers, because nothing downstream re-runs the
    mechanism.

    Privacy:
        Each call is one release with fresh noise; calling it twice spends the budget
        twice. Protected unit: one row; its privacy loss is at most its level's
        ``eps_effective`` <= ε_i. Public: ε_i (the per-group ε histogram and n are in the
        output), the domain, the ``other`` rule and the key set. See
        :func:`hdp_spark.hdp_histogram`.
    """
    result = histogram_release(
        df, spec, by=by, keys=keys, unsafe_seed=unsafe_seed, project=project, counts=counts,
        schema=schema,
    )
    out: DataFrame = SparkEngine(df).materialize(
        result.by, result.fields(), result.tuples(), result.unsafe_seed
    )
    return out
