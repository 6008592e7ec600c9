"""Spark backend of schema validation: one native aggregate pass, counts only.

:func:`validate` runs a single ``df.agg(...)``: ``count(when(rule_violated, 1))`` per row
rule (equivalent to ``sum(when(..., 1))`` but 0, not null, on an empty table), plus
``count``/``count_distinct`` for the user-id rules. Only the counts reach the driver. No
UDFs and no RDDs, so it runs on classic PySpark and on Spark Connect alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.schema import TableSchema
from hdp_spark.core.validation import (
    Rule,
    RuleKind,
    Scope,
    ValidationReport,
)
from hdp_spark.errors import ParameterError
from hdp_spark.spark._common import is_dataframe

__all__ = ["check_release", "validate", "validation_query"]

_INF = float("inf")


def _kind(dtype: T.DataType) -> str:
    if isinstance(dtype, T.BooleanType):
        return "boolean"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "integer"
    if isinstance(dtype, T.FloatType | T.DoubleType | T.DecimalType):
        return "float"
    if isinstance(dtype, T.StringType | T.VarcharType | T.CharType):
        return "string"
    return "other"


def _number(name: str, dtype: T.DataType) -> Column:
    return F.col(name).cast("double") if isinstance(dtype, T.DecimalType) else F.col(name)


def _missing(name: str, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.FloatType | T.DoubleType):
        return F.col(name).isNull() | F.isnan(F.col(name))
    return F.col(name).isNull()


def _finite(x: Column) -> Column:
    # Spark orders NaN above +inf and says NaN = NaN: exclude it explicitly.
    return x.isNotNull() & ~F.isnan(x) & (x != F.lit(_INF)) & (x != F.lit(-_INF))


def _violated(rule: Rule, fields: dict[str, T.DataType]) -> Column:
    """The row-level condition of a row rule (true = violated; null counts as not)."""
    kind, name = rule.kind, rule.column
    dtype = fields[name]
    if kind is RuleKind.MISSING:
        return _missing(name, dtype)
    if kind is RuleKind.DOMAIN:
        return F.col(name).isNotNull() & ~F.col(name).isin(*rule.params)
    x = _number(name, dtype)
    if kind is RuleKind.NEGATIVE:
        return ~F.isnan(x) & (x < F.lit(0.0))
    if kind is RuleKind.ZERO:
        return x == F.lit(0.0)
    if kind is RuleKind.POSINF:
        return x == F.lit(_INF)
    if kind is RuleKind.NONFINITE:
        return (x == F.lit(_INF)) | (x == F.lit(-_INF))
    if kind is RuleKind.EPS_RANGE:
        lo, hi = rule.params
        outside = F.lit(False)
        if lo is not None:
            outside = outside | (x < F.lit(float(lo)))
        if hi is not None:
            outside = outside | (x > F.lit(float(hi)))
        return _finite(x) & (x > F.lit(0.0)) & outside
    if kind is RuleKind.BOUNDS:
        lo, hi = rule.params
        return _finite(x) & ((x < F.lit(float(lo))) | (x > F.lit(float(hi))))
    msg = f"rule kind {kind!r} is not a row condition"  # pragma: no cover
    raise AssertionError(msg)  # pragma: no cover


def _aggregates(
    rules: Sequence[Rule], fields: dict[str, T.DataType]
) -> tuple[list[Column], list[Any]]:
    """The aggregate expressions, and per rule how to read its count from the result row."""
    exprs: list[Column] = [F.count(F.lit(1)).alias("__rows")]
    readers: list[Any] = []
    for i, rule in enumerate(rules):
        kind = rule.kind
        if kind is RuleKind.MIN_ROWS:
            need = int(rule.params[0])
            readers.append(lambda row, need=need: max(0, need - int(row["__rows"])))
        elif kind is RuleKind.DUPLICATE:
            uid = F.col(rule.column)
            exprs += [F.count(uid).alias(f"__r{i}_n"), F.count_distinct(uid).alias(f"__r{i}_d")]
            readers.append(lambda row, i=i: int(row[f"__r{i}_n"]) - int(row[f"__r{i}_d"]))
        elif kind is RuleKind.EPS_VARIES:
            uid = F.col(rule.params[0])
            e = _number(rule.column, fields[rule.column])
            # null and NaN ε are one value (as on pandas); Spark normalizes -0.0 to 0.0
            e_norm = F.when(e.isNull() | F.isnan(e), F.lit(None)).otherwise(e)
            pair = F.when(uid.isNotNull(), F.struct(uid.alias("u"), e_norm.alias("e")))
            exprs += [F.count_distinct(pair).alias(f"__r{i}_p"),
                      F.count_distinct(uid).alias(f"__r{i}_d")]
            readers.append(lambda row, i=i: int(row[f"__r{i}_p"]) - int(row[f"__r{i}_d"]))
        else:
            cond = _violated(rule, fields)
            exprs.append(F.count(F.when(cond, F.lit(1))).alias(f"__r{i}"))
            readers.append(lambda row, i=i: int(row[f"__r{i}"]))
    return exprs, readers


def validate(df: DataFrame, schema: TableSchema, *, scope: Scope = "all") -> ValidationReport:
    """Count the rule violations of a Spark table against a schema (counts, never data).

    One Spark job: a single ``df.agg(...)`` whose result is one row of counts. Same
    arguments, rules and results as :func:`hdp_spark.pandas.validate`.

    Args:
        df: the table (classic or Spark Connect DataFrame).
        schema: from :func:`hdp_spark.schema.load_schema` or built in code.
        scope: ``"all"`` (default, every rule) or ``"release"`` (blocking rules only).

    Returns:
        A :class:`~hdp_spark.core.validation.ValidationReport`.

    Raises:
        ParameterError: ``df`` or ``schema`` has the wrong type.
        SchemaError: a declared column is missing or has the wrong type.

    Privacy:
        Counts of value rules depend on private values: the report is for the trusted
        operator, never for publication or for gating a release.
    """
    if not is_dataframe(df):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    if not isinstance(schema, TableSchema):
        msg = f"`schema` must be a TableSchema, got {type(schema).__name__}."
        raise ParameterError(msg)
    exprs, finish = validation_query(df, schema, scope=scope)
    return finish(df.agg(*exprs).collect()[0])


def validation_query(
    df: DataFrame, schema: TableSchema, *, scope: Scope = "all"
) -> tuple[list[Column], Callable[[Any], ValidationReport]]:
    """The aggregate expressions of :func:`validate` over ``df`` and the function that
    reads its report from the result row, so that a caller can run them in one ``agg``
    with its own aggregates (the job runner's input checks: one Spark job for both).

    Raises:
        SchemaError: a declared column is missing or has the wrong type (before any job).

    Privacy:
        As :func:`validate`: counts for the trusted operator only.
    """
    rules = schema.rules(scope)
    fields = {f.name: f.dataType for f in df.schema.fields}
    schema.check_columns({n: (_kind(t), t.simpleString()) for n, t in fields.items()}, scope)
    exprs, readers = _aggregates(rules, fields)

    def finish(row: Any) -> ValidationReport:
        counts = tuple(read(row) for read in readers)
        return ValidationReport(schema.name, "spark", scope, int(row["__rows"]), rules, counts)

    return exprs, finish


def check_release(
    df: DataFrame, schema: TableSchema, specs: Sequence[object], by: Sequence[str]
) -> None:
    """The schema step of a release: declared columns, then blocking rules; raise or pass.

    Runs before the release's own Spark job, before any noise is drawn or result object is
    made, so a rejected release spends no budget. Cost: one extra aggregate job over the
    input (see docs/schemas.md).
    """
    if not isinstance(schema, TableSchema):
        msg = f"`schema` must be a TableSchema or None, got {type(schema).__name__}."
        raise ParameterError(msg)
    schema.check_reads(specs, by)
    validate(df, schema, scope="release").raise_for_release()
