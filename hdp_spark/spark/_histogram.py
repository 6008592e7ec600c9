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
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.histogram.release import (
    build_histogram_groups,
)
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import SchemaError
from hdp_spark.spark._common import (
    INTEGRAL,
    collect_cells,
    dataframe_schema,
    field,
)
from hdp_spark.spark.columns import native_cells
from hdp_spark.spark.expressions import with_level
from hdp_spark.spark.extension import native_ready
from hdp_spark.spark.sql_text import ident

__all__ = ["category_expr", "histogram_tables"]

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


