"""Native Spark column expressions for the per-row rules of :mod:`hdp_spark.core`.

Each function mirrors a numpy reference implementation in the core
(:func:`~hdp_spark.core.levels.levels_numpy`, :func:`~hdp_spark.core.encoding.encode_numpy`)
with the same IEEE-754 operations, so both engines produce identical level codes and
fixed-point integers.
"""

from __future__ import annotations

import math

from pyspark.sql import Column
from pyspark.sql import functions as F

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.levels import BELOW_GRID_LEVEL, EPS_CAP, EPS_FLOOR, INVALID_LEVEL, EpsGrid

__all__ = ["encode_expr", "level_expr"]

_INF = float("inf")


def level_expr(eps: str, grid: EpsGrid | None) -> Column:
    """ε column -> level code (see :mod:`hdp_spark.core.levels`)."""
    raw = F.col(eps).cast("double")
    invalid = raw.isNull() | F.isnan(raw) | (raw < F.lit(0.0))
    # the public floor and cap come first (positive ε < EPS_FLOOR -> 0, finite ε > EPS_CAP
    # -> EPS_CAP); invalid values pass through unchanged and are coded below
    e = (
        F.when((raw > F.lit(0.0)) & (raw < F.lit(EPS_FLOOR)), F.lit(0.0))
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
    could never fire; the result is the same for every row.
    """
    x = F.col(column).cast("double")
    if floating:
        x = F.nanvl(x, F.lit(float(fill)))  # NaN -> fill (null stays null)
    if nullable:
        x = F.coalesce(x, F.lit(float(fill)))  # null -> fill
    x = F.least(F.greatest(x, F.lit(float(lower))), F.lit(float(upper)))
    span = float(upper) - float(lower)
    u = (x - F.lit(float(lower))) / F.lit(span)
    return F.floor(u * F.lit(float(FIXED_ONE)) + F.lit(0.5)).cast("long")
