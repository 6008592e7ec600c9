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
from hdp_spark.spark.expressions import level_sql
from hdp_spark.spark.sql_text import double_lit, ident

__all__ = ["ROW_INPUTS", "VectorSql", "distribution_sql", "level_of", "limbs", "mean_sql",
           "row_inputs", "vector_parts", "vector_q", "vector_q_sql", "vector_row_sql",
           "vector_sql"]

_INF = float("inf")
_LO_MASK = (1 << LIMB_BITS) - 1


def level_of(spec: Any) -> Column:
    """The ε level of each row: the exact ε (no grid), the release API's level rules.

    Privacy:
        None: reads the public ε column.
    """
    return F.expr(level_sql(ident(spec.eps)))


def _usable(level: str) -> str:
    return f"({level} > {double_lit(0.0)} AND {level} < {double_lit(_INF)})"


def _safe(level: str) -> str:
    """The level where it is a usable ε, else 1.0 (no division by zero in ANSI mode)."""
    return f"CASE WHEN {_usable(level)} THEN {level} ELSE {double_lit(1.0)} END"


def _encode(value: str, bound: str) -> str:
    """Mirror of :func:`hdp_spark.core.ldp.common.encode_reports_numpy`."""
    clipped = f"least(greatest({value}, -({bound})), {bound})"
    return (f"CAST(floor({clipped} * {double_lit(float(2**FRACTION_BITS))} + "
            f"{double_lit(0.5)}) AS BIGINT)")


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


def mean_sql(mechanism: str, report: str, level: str, lower: str, upper: str
             ) -> tuple[str, str]:
    """The SQL texts ``(index, q)`` of a scalar mean's reports over SQL texts (``report``
    an identifier, ``level`` the row's level, the bounds double expressions): the one
    template of the release path, the Column and the SQL function.

    Privacy:
        None: per-row expressions over the reports (already ε_i-LDP).
    """
    y = f"CAST({report} AS DOUBLE)"
    valid = f"({y} IS NOT NULL AND NOT isnan({y}))"
    use = f"({valid} AND {_usable(level)})"
    if mechanism == "laplace":
        two = double_lit(2.0)
        z = f"(({y} - (({lower} + {upper}) / {two})) / (({upper} - {lower}) / {two}))"
        bound = f"(({double_lit(128.0)} / {_safe(level)}) + {double_lit(1.0)})"
        q = _encode(z, bound)
    else:
        q = f"CAST(signum({y}) AS BIGINT)"
    return (f"CAST(CASE WHEN {valid} THEN 0 ELSE -1 END AS BIGINT)",
            f"CASE WHEN {use} THEN {q} ELSE CAST(0 AS BIGINT) END")


def distribution_sql(index: str, sign: str, level: str, m: str) -> tuple[str, str]:
    """The SQL texts ``(index, q)`` of frequency-oracle reports over SQL texts (``index``
    and ``sign`` identifiers, ``level`` the row's level, ``m`` the oracle's row count as a
    double): the one template of the release path, the Column and the SQL function.

    Privacy:
        None: per-row expressions over the reports (already ε_i-LDP).
    """
    j, b = f"CAST({index} AS DOUBLE)", f"CAST({sign} AS DOUBLE)"
    valid = (f"({j} IS NOT NULL AND NOT isnan({j}) AND {j} >= {double_lit(0.0)} AND {j} < {m} "
             f"AND {j} = CAST(floor({j}) AS DOUBLE) AND {b} IS NOT NULL AND NOT isnan({b}))")
    use = f"({valid} AND {_usable(level)})"
    return (f"CASE WHEN {valid} THEN CAST({j} AS BIGINT) ELSE CAST(-1 AS BIGINT) END",
            f"CAST(CASE WHEN {use} THEN signum({b}) ELSE {double_lit(0.0)} END AS BIGINT)")


def _mean_inputs(spec: LdpMeanSpec, level: str) -> tuple[Column, Column]:
    index, q = mean_sql(spec.mechanism, ident(spec.report), level,
                        double_lit(float(spec.lower)), double_lit(float(spec.upper)))
    return F.expr(index), F.expr(q)


def _distribution_inputs(spec: LdpDistributionSpec, level: str) -> tuple[Column, Column]:
    index, q = distribution_sql(ident(spec.index), ident(spec.sign), level,
                                double_lit(float(spec.oracle.m)))
    return F.expr(index), F.expr(q)


@dataclass(frozen=True)
class VectorSql:
    """The per-row parts of a Duchi vector mean as SQL texts: ``valid`` (the report has d
    coordinates, none NaN), ``use`` (valid with a usable ε), ``bound`` (the encoding's
    clamp) and ``array`` (the report as doubles, or ``[0.0]`` when invalid: the JVM binds
    the ``transform``'s variable as a double). The one template of the
    release path (``posexplode``), the Column and the SQL function (``transform``)."""

    valid: str
    use: str
    bound: str
    array: str


def vector_sql(report: str, level: str, d: str, sphere: str) -> VectorSql:
    """:class:`VectorSql` over SQL texts: ``report`` the array column, ``level`` the row's
    level, ``d`` the dimension (an integer literal), ``sphere`` the constant A_d
    (:func:`~hdp_spark.core.ldp.common.sphere_constant`, a double literal).

    Privacy:
        None: per-row expressions, nothing is published.
    """
    # array_contains uses Spark's NaN = NaN semantics (true on a NaN element, null on a null
    # element): no higher-order lambda for the check, so it is code-generated
    valid = (f"({report} IS NOT NULL AND size({report}) = {d} AND NOT "
             f"array_contains({report}, {double_lit(float('nan'))}))")
    bound = (f"((({double_lit(2.0)} / {_safe(level)}) + {double_lit(1.0)}) * {sphere}) * "
             f"{double_lit(DUCHI_BOUND_SLACK)}")
    return VectorSql(valid, f"({valid} AND {_usable(level)})", bound,
                     f"CAST(CASE WHEN {valid} THEN {report} ELSE array({double_lit(0.0)}) END "
                     "AS ARRAY<DOUBLE>)")


def vector_q_sql(value: str, use: str, bound: str, radius: str) -> str:
    """One coordinate's fixed-point integer (0 unless the row is used), over SQL texts.

    Privacy:
        None: a per-row expression.
    """
    return (f"CASE WHEN {use} THEN {_encode(f'({value} / {radius})', bound)} "
            "ELSE CAST(0 AS BIGINT) END")


def vector_row_sql(report: str, level: str, d: str, radius: str, sphere: str
                   ) -> tuple[str, str]:
    """The SQL texts ``(index, q)`` of a vector mean's reports: index 0 for a valid report
    (-1 otherwise), q the array of the coordinates' integers (one ``transform``): the
    cells the release path's ``posexplode`` gives, coordinate k at index k. The Column's
    and the SQL function's template.

    Privacy:
        None: per-row expressions over the reports (already ε_i-LDP).
    """
    p = vector_sql(report, level, d, sphere)
    lam = "__hdp_coordinate"
    q = f"transform({p.array}, {lam} -> {vector_q_sql(lam, p.use, p.bound, radius)})"
    return f"CAST(CASE WHEN {p.valid} THEN 0 ELSE -1 END AS BIGINT)", q


def _vector_texts(spec: LdpVectorMeanSpec) -> tuple[str, str, str, str]:
    return (ident(spec.report), str(int(spec.d)), double_lit(float(spec.radius)),
            double_lit(sphere_constant(spec.d)))


def vector_parts(spec: LdpVectorMeanSpec, level: str) -> VectorSql:
    """The per-row parts of ``spec`` as SQL texts (see :class:`VectorSql`; ``level``: the
    SQL text of the row's level).

    Privacy:
        None: per-row expressions, nothing is published.
    """
    report, d, _, sphere = _vector_texts(spec)
    return vector_sql(report, level, d, sphere)


def vector_q(value: str, use: str, bound: str, spec: LdpVectorMeanSpec) -> Column:
    """One coordinate's fixed-point integer as a Column (``value``, ``use``, ``bound``: SQL
    texts, e.g. column names).

    Privacy:
        None: a per-row expression.
    """
    return F.expr(vector_q_sql(value, use, bound, _vector_texts(spec)[2]))


def _vector_inputs(spec: LdpVectorMeanSpec, level: str) -> tuple[Column, Column]:
    report, d, radius, sphere = _vector_texts(spec)
    index, q = vector_row_sql(report, level, d, radius, sphere)
    return F.expr(index), F.expr(q)


ROW_INPUTS: dict[type, Callable[[Any, str], tuple[Column, Column]]] = {
    LdpMeanSpec: _mean_inputs,
    LdpVectorMeanSpec: _vector_inputs,
    LdpDistributionSpec: _distribution_inputs,
}
"""Per spec class: ``(spec, level SQL text) -> (index, q)``, q a bigint (scalar reports) or an
array of bigints (one per coordinate of a vector report)."""


def row_inputs(spec: Any, level: str) -> tuple[Column, Column]:
    """``(index, q)`` of each row for ``spec`` (see :data:`ROW_INPUTS`; ``level``: the SQL
    text of the row's level, a column name or :func:`level_sql`).

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
