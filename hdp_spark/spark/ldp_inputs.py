"""The per-row native expressions of the local-DP aggregators on Spark: ε -> level, the
report -> (index, fixed-point integer q). Shared by the release path
(:mod:`hdp_spark.spark.ldp`: ``groupBy(level, index)`` count and limb sums) and the Column
aggregators (:mod:`hdp_spark.spark.columns_ldp`: the native ``hdp_ldp_cells`` aggregate), so
both compute the same integers.

The expressions use the same IEEE-754 operations as :mod:`hdp_spark.pandas.ldp`
(:func:`~hdp_spark.core.ldp.common.encode_reports_numpy`). Each aggregator's expressions are
found by its spec's class in :data:`ROW_INPUTS` (no type ladder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from hdp_spark.core.ldp.common import DUCHI_BOUND_SLACK, FRACTION_BITS, LIMB_BITS, sphere_constant
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.spark.expressions import level_expr

__all__ = ["ROW_INPUTS", "VectorParts", "level_of", "limbs", "row_inputs", "vector_parts",
           "vector_q"]

_INF = float("inf")
_LO_MASK = (1 << LIMB_BITS) - 1


def level_of(spec: Any) -> Column:
    """The ε level of each row: the exact ε (no grid), the release API's level rules.

    Privacy:
        None: reads the public ε column.
    """
    return level_expr(spec.eps, None)


def _usable(level: Column) -> Column:
    return (level > F.lit(0.0)) & (level < F.lit(_INF))


def _safe(level: Column) -> Column:
    """The level where it is a usable ε, else 1.0 (no division by zero in ANSI mode)."""
    return F.when(_usable(level), level).otherwise(F.lit(1.0))


def _encode(value: Column, bound: Column) -> Column:
    """Mirror of :func:`hdp_spark.core.ldp.common.encode_reports_numpy`."""
    clipped = F.least(F.greatest(value, -bound), bound)
    return F.floor(clipped * F.lit(float(2**FRACTION_BITS)) + F.lit(0.5)).cast("long")


def limbs(q: Column, name: str) -> list[Column]:
    """``q`` split into its two limbs ``q >> 31`` and ``q & (2**31 - 1)`` (the release
    path's summands; the native Column aggregate splits the same way).

    Privacy:
        None: a change of representation.
    """
    return [
        F.shiftright(q, LIMB_BITS).alias(f"{name}hi"),
        q.bitwiseAND(F.lit(_LO_MASK).cast("long")).alias(f"{name}lo"),
    ]


def _mean_inputs(spec: LdpMeanSpec, level: Column) -> tuple[Column, Column]:
    y = F.col(spec.report).cast("double")
    valid = y.isNotNull() & ~F.isnan(y)
    use = valid & _usable(level)
    if spec.mechanism == "laplace":
        mid = (float(spec.lower) + float(spec.upper)) / 2.0
        half = (float(spec.upper) - float(spec.lower)) / 2.0
        z = (y - F.lit(mid)) / F.lit(half)
        bound = (F.lit(128.0) / _safe(level)) + F.lit(1.0)
        q = _encode(z, bound)
    else:
        q = F.signum(y).cast("long")
    q = F.when(use, q).otherwise(F.lit(0).cast("long"))
    return F.when(valid, F.lit(0)).otherwise(F.lit(-1)).cast("long"), q


def _distribution_inputs(spec: LdpDistributionSpec, level: Column) -> tuple[Column, Column]:
    j = F.col(spec.index).cast("double")
    b = F.col(spec.sign).cast("double")
    m = float(spec.oracle.m)
    valid = (
        j.isNotNull() & ~F.isnan(j) & (j >= F.lit(0.0)) & (j < F.lit(m))
        & (j == F.floor(j).cast("double")) & b.isNotNull() & ~F.isnan(b)
    )
    use = valid & _usable(level)
    q = F.when(use, F.signum(b)).otherwise(F.lit(0.0)).cast("long")
    return F.when(valid, j.cast("long")).otherwise(F.lit(-1).cast("long")), q


@dataclass(frozen=True, eq=False)  # Columns do not compare as booleans
class VectorParts:
    """The per-row parts of a Duchi vector mean: ``valid`` (the report has d coordinates,
    none NaN), ``use`` (valid with a usable ε), ``bound`` (the encoding's clamp) and
    ``array`` (the report, or ``[0.0]`` when invalid)."""

    valid: Column
    use: Column
    bound: Column
    array: Column


def vector_parts(spec: LdpVectorMeanSpec, level: Column) -> VectorParts:
    """The per-row parts of ``spec`` (see :class:`VectorParts`).

    Privacy:
        None: per-row expressions, nothing is published.
    """
    arr = F.col(spec.report)
    # array_contains uses Spark's NaN = NaN semantics (true on a NaN element, null on a null
    # element): no higher-order lambda per row, so the whole expression is code-generated
    valid = (
        arr.isNotNull()
        & (F.size(arr) == F.lit(spec.d))
        & ~F.array_contains(arr, F.lit(float("nan")))
    )
    bound = (((F.lit(2.0) / _safe(level)) + F.lit(1.0)) * F.lit(sphere_constant(spec.d))) * F.lit(
        DUCHI_BOUND_SLACK
    )
    use = valid & _usable(level)
    safe_arr = F.when(valid, arr).otherwise(F.array(F.lit(0.0)))
    return VectorParts(valid, use, bound, safe_arr)


def vector_q(value: Column, use: Column, bound: Column, radius: float) -> Column:
    """One coordinate's fixed-point integer (0 unless the row is used).

    Privacy:
        None: a per-row expression.
    """
    return F.when(use, _encode(value / F.lit(float(radius)), bound)).otherwise(
        F.lit(0).cast("long"))


def _vector_inputs(spec: LdpVectorMeanSpec, level: Column) -> tuple[Column, Column]:
    """(index 0 or -1, the array of the coordinates' integers): the cells the release path's
    ``posexplode`` gives, coordinate k at index k."""
    p = vector_parts(spec, level)
    q = F.transform(p.array, lambda v: vector_q(v, p.use, p.bound, spec.radius))
    return F.when(p.valid, F.lit(0)).otherwise(F.lit(-1)).cast("long"), q


ROW_INPUTS: dict[type, Callable[[Any, Column], tuple[Column, Column]]] = {
    LdpMeanSpec: _mean_inputs,
    LdpVectorMeanSpec: _vector_inputs,
    LdpDistributionSpec: _distribution_inputs,
}
"""Per spec class: ``(spec, level) -> (index, q)``, q a bigint (scalar reports) or an
array of bigints (one per coordinate of a vector report)."""


def row_inputs(spec: Any, level: Column) -> tuple[Column, Column]:
    """``(index, q)`` of each row for ``spec`` (see :data:`ROW_INPUTS`).

    Raises:
        ParameterError: ``spec`` is not a local-DP spec.

    Privacy:
        None: per-row expressions over the reports (already ε_i-LDP).
    """
    build = ROW_INPUTS.get(type(spec))
    if build is None:
        msg = (f"`spec` must come from ldp_mean, ldp_mean_vector or ldp_distribution, got "
               f"{type(spec).__name__}.")
        raise ParameterError(msg)
    return build(spec, level)
