"""Native Spark column expressions for the per-row rules of :mod:`hdp_spark.core`.

Each function mirrors a numpy reference implementation in the core
(:func:`~hdp_spark.core.levels.levels_numpy`, :func:`~hdp_spark.core.encoding.encode_numpy`)
with the same IEEE-754 operations, so both engines produce identical level codes and
fixed-point integers.
"""

from __future__ import annotations

import math

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.levels import BELOW_GRID_LEVEL, EPS_CAP, EPS_FLOOR, INVALID_LEVEL, EpsGrid
from hdp_spark.spark.sql_text import double_array_lit, double_lit, ident

__all__ = ["GRID_JOIN_MIN_POINTS", "encode_expr", "encode_sql", "encode_text", "level_expr",
           "level_sql", "with_level"]

_INF = float("inf")


def level_sql(eps: str) -> str:
    """The SQL text of :func:`level_expr` without a grid, over the SQL text ``eps`` (an
    identifier): the exact ε with the public floor and cap, invalid ε coded. The one
    template of the exact level of the Columns and of the SQL functions.

    Privacy:
        None: reads the public ε column.
    """
    raw = f"CAST({eps} AS DOUBLE)"
    zero, inf, cap = double_lit(0.0), double_lit(_INF), double_lit(EPS_CAP)
    capped = (
        f"CASE WHEN ({raw} > {zero} AND {raw} < {double_lit(EPS_FLOOR)}) OR {raw} = {zero} "
        f"THEN {zero} WHEN {raw} > {cap} AND {raw} < {inf} THEN {cap} ELSE {raw} END"
    )
    return (f"CASE WHEN {raw} IS NULL OR isnan({raw}) OR {raw} < {zero} "
            f"THEN {double_lit(INVALID_LEVEL)} ELSE {capped} END")


def level_expr(eps: str, grid: EpsGrid | None) -> Column:
    """ε column -> level code (see :mod:`hdp_spark.core.levels`)."""
    if grid is None:
        return F.expr(level_sql(ident(eps)))
    raw = F.expr(f"CAST({ident(eps)} AS DOUBLE)")
    invalid = raw.isNull() | F.isnan(raw) | (raw < F.lit(0.0))
    # the public floor and cap come first (positive ε < EPS_FLOOR -> 0, finite ε > EPS_CAP
    # -> EPS_CAP); invalid values pass through unchanged and are coded below
    e = (
        F.when(((raw > F.lit(0.0)) & (raw < F.lit(EPS_FLOOR))) | (raw == F.lit(0.0)), F.lit(0.0))
        .when((raw > F.lit(EPS_CAP)) & (raw < F.lit(_INF)), F.lit(EPS_CAP))
        .otherwise(raw)
    )
    base = e
    if grid is not None:
        pts = grid.points()
        last = len(pts) - 1
        arr = F.array(*[F.lit(p) for p in pts])
        ratio_log = math.log(grid.ratio)
        k0 = F.floor(F.log(e / F.lit(pts[0])) / F.lit(ratio_log)).cast("int")
        k0 = F.least(F.greatest(k0, F.lit(0)), F.lit(last))
        # Exact correction of the approximate log (off by at most one point): of the grid
        # points k0-1, k0, k0+1 keep the largest one <= e, compared as floats. One slice
        # references k0 once, so the logarithm is evaluated once per row (a chain of
        # CASEs on k0 would copy it into every branch).
        window = F.slice(arr, F.greatest(k0, F.lit(1)), 3)
        snapped = F.array_max(F.filter(window, lambda p: p <= e))
        finite_pos = (e > F.lit(0.0)) & (e < F.lit(_INF))
        base = (
            F.when(finite_pos & (e < F.lit(pts[0])), F.lit(BELOW_GRID_LEVEL))
            .when(finite_pos, snapped)
            .otherwise(base)
        )
    return F.when(invalid, F.lit(INVALID_LEVEL)).otherwise(base)


GRID_JOIN_MIN_POINTS = 8192
"""Grids with more points than this are read through a broadcast join, not a constant.

A grid constant is part of the plan: Spark's optimizer hashes and compares it in its rules
and ships it in every task, which costs seconds per release at 10^4-10^5 points. Whole
global releases on 1M rows (benchmarks/log/2026-11-notebook.md) took, constant against join: 1,389
points 0.51 s / 0.94 s; 4,613 points 0.63 / 0.94 s; 8,134 points 0.96 / 0.49 s; 27,638
points 1.61 / 0.71 s; 92,111 points 6.31 / 1.13 s. Small grids keep the constant, whose
per-row read is cheaper.
"""


def with_level(df: DataFrame, eps: str, grid: EpsGrid | None, name: str) -> DataFrame:
    """``df`` with the level code of ``eps`` in column ``name`` (same codes as
    :func:`level_expr`), computed in chained projections for a grid.

    The grid estimate k0 = floor(ln(ε/lowest)/ln(ratio)) is projected once, then the three
    candidate points around it are compared as floats. They are read with ``get`` from one
    folded array constant (0-based, null outside the array: no ANSI bounds error path), or,
    for grids above :data:`GRID_JOIN_MIN_POINTS` points, from a broadcast table of
    (index, point below, point, point above) joined on k0, whose missing neighbours are null
    too. Spark does not merge the projections because the later ones read their input
    several times and a logarithm is not cheap, so the logarithm runs once per row and no
    higher-order function (interpreted, not code-generated) is needed. Built from SQL text
    (see :mod:`hdp_spark.spark.sql_text`). Exact levels need no staging. Invalid ε (null,
    NaN, negative) passes the cap unchanged, so it is recognised on the capped value.
    """
    if grid is None:
        return df.withColumn(name, level_expr(eps, None))
    pts = grid.points()
    last = len(pts) - 1
    raw = f"CAST({ident(eps)} AS DOUBLE)"
    e, k = "`__hdp_level_e`", "`__hdp_level_k0`"
    zero, inf = double_lit(0.0), double_lit(_INF)
    floor_, cap = double_lit(EPS_FLOOR), double_lit(EPS_CAP)
    # the public floor and cap (and -0.0 -> +0.0, as levels_numpy); invalid values pass
    # through unchanged and are coded below
    capped = (
        f"CASE WHEN ({raw} > {zero} AND {raw} < {floor_}) OR {raw} = {zero} THEN {zero} "
        f"WHEN {raw} > {cap} AND {raw} < {inf} THEN {cap} ELSE {raw} END"
    )
    finite_pos = f"({e} > {zero} AND {e} < {inf})"
    # only where ε is finite and positive: log(0) = -inf would overflow the cast (ANSI)
    k0 = (
        f"CASE WHEN {finite_pos} THEN least(greatest(CAST(floor(ln({e} / "
        f"{double_lit(pts[0])}) / {double_lit(math.log(grid.ratio))}) AS INT), 0), {last}) "
        "ELSE 0 END"
    )
    cols = [ident(c) for c in df.columns if c != name]
    # Chained projections with explicit column lists: each is one parse and one analysis
    # (withColumn/drop cost ~25 ms of driver time apiece, 100+ ms per release).
    staged = df.selectExpr(*cols, f"{capped} AS {e}")
    if len(pts) > GRID_JOIN_MIN_POINTS:
        kk = "`__hdp_level_kk`"
        above, at, below = "`__hdp_level_up`", "`__hdp_level_at`", "`__hdp_level_dn`"
        staged = staged.selectExpr(*cols, e, f"{k0} AS {k}").join(
            F.broadcast(_grid_table(df.sparkSession, pts)), F.expr(f"{k} = {kk}"), "left"
        )
    else:
        # 0-based estimate k; the true index is k-1, k or k+1. get() reads a 0-based index
        # and gives null outside the array, so a missing neighbour never compares true.
        arr = "`__hdp_level_pts`"  # the grid, one folded constant in its own column
        above, at, below = (f"get({arr}, {k} {d})" for d in ("+ 1", "+ 0", "- 1"))
        points = double_array_lit(pts)  # not len(pts) literal nodes
        staged = staged.selectExpr(*cols, e, f"{k0} AS {k}", f"{points} AS {arr}")
    # the largest candidate <= ε (null if none: never when the estimate is off by <= 1)
    snapped = (
        f"CASE WHEN {above} <= {e} THEN {above} WHEN {at} <= {e} THEN {at} "
        f"WHEN {below} <= {e} THEN {below} END"
    )
    level = (
        f"CASE WHEN {e} IS NULL OR isnan({e}) OR {e} < {zero} THEN {double_lit(INVALID_LEVEL)} "
        f"WHEN {finite_pos} AND {e} < {double_lit(pts[0])} THEN {double_lit(BELOW_GRID_LEVEL)} "
        f"WHEN {finite_pos} THEN {snapped} ELSE {e} END"
    )
    return staged.selectExpr(*cols, f"{level} AS {ident(name)}")


def _grid_table(session: object, pts: tuple[float, ...]) -> DataFrame:
    """The grid as a local table: index k and the points k-1, k, k+1 (null outside)."""
    n = len(pts)
    table = pa.table(
        {
            "__hdp_level_kk": pa.array(range(n), type=pa.int32()),
            "__hdp_level_dn": pa.array([None, *pts[:-1]], type=pa.float64()),
            "__hdp_level_at": pa.array(pts, type=pa.float64()),
            "__hdp_level_up": pa.array([*pts[1:], None], type=pa.float64()),
        }
    )
    return session.createDataFrame(table)  # type: ignore[attr-defined,no-any-return]


def encode_sql(
    column: str,
    lower: float,
    upper: float,
    fill: float,
    *,
    nullable: bool = True,
    floating: bool = True,
) -> str:
    """SQL text of :func:`encode_expr` (for building a whole aggregate as one string)."""
    span = float(upper) - float(lower)
    return encode_text(ident(column), double_lit(lower), double_lit(upper), double_lit(span),
                       double_lit(fill), nullable=nullable, floating=floating)


def encode_text(
    column: str,
    lower: str,
    upper: str,
    span: str,
    fill: str,
    *,
    nullable: bool = True,
    floating: bool = True,
) -> str:
    """The SQL text of the encoding over SQL texts: ``column`` an identifier, the bounds,
    their span (``upper - lower`` as a double) and the fill double expressions. The one
    template of :func:`encode_sql` and of the SQL functions' per-row expressions (the JVM
    substitutes the call's arguments and constants for identifiers in it).

    Privacy:
        None: a per-row expression of public rules.
    """
    x = f"CAST({column} AS DOUBLE)"
    if floating:
        x = f"nanvl({x}, {fill})"  # NaN -> fill (null stays null)
    if nullable:
        x = f"coalesce({x}, {fill})"  # null -> fill
    x = f"least(greatest({x}, {lower}), {upper})"
    u = f"(({x} - {lower}) / {span})"
    return f"CAST(floor({u} * {double_lit(float(FIXED_ONE))} + 0.5D) AS BIGINT)"


def encode_expr(
    column: str,
    lower: float,
    upper: float,
    fill: float,
    *,
    nullable: bool = True,
    floating: bool = True,
) -> Column:
    """Value column -> fixed-point integer in [0, 2**31] (see :mod:`hdp_spark.core.encoding`).

    ``nullable=False`` / ``floating=False`` (from the column's schema: declared non-null, or
    an integral or decimal type, which has no NaN) drop the null / NaN substitution, which
    could never fire; the result is the same for every row. Built from SQL text (one parse
    instead of a dozen JVM calls, see :mod:`hdp_spark.spark.sql_text`).
    """
    return F.expr(encode_sql(column, lower, upper, fill, nullable=nullable, floating=floating))
