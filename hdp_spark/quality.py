"""great_expectations suites generated from a :class:`~hdp_spark.schema.TableSchema`.

For the ETL data-quality report of the trusted pipeline operator, never for a release: the
suite counts bad values in private columns. Releases use
:meth:`~hdp_spark.core.validation.ValidationReport.raise_for_release` instead.

Every expectation carries ``meta={"hdp_rule": "<column>:<rule>"}``, the key of the schema
rule it mirrors, so GE results and :class:`~hdp_spark.core.validation.ValidationReport`
line up. Two rules differ on purpose:

* ``<user_id>:unique`` maps to ``ExpectColumnValuesToBeUnique``, whose count is every row
  of a repeated id (hdp_spark counts the rows beyond the first of each id);
* ``eps:constant_per_user`` has no portable GE expectation and is left out of the suite.

great_expectations is imported lazily (it takes seconds) and runs offline in an ephemeral
context; its analytics are switched off through ``GX_ANALYTICS_ENABLED=false`` unless the
caller has set that variable.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from hdp_spark.core.schema import TableSchema
from hdp_spark.core.validation import Rule, RuleKind
from hdp_spark.errors import EngineNotSupportedError, ParameterError

if TYPE_CHECKING:
    from great_expectations import ExpectationSuite

__all__ = ["expectation_suite", "run_expectations"]

_FMAX = sys.float_info.max
"""Largest finite float: ``x <= _FMAX`` excludes +inf in a GE row condition portably."""

_TYPE_LISTS: dict[str, list[str]] = {
    "integer": [
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
        "ByteType", "ShortType", "IntegerType", "LongType",
    ],
    "float": [
        "float16", "float32", "float64", "Float32", "Float64",
        "FloatType", "DoubleType", "DecimalType",
    ],
    "string": ["object", "str", "string", "StringType", "VarcharType", "CharType"],
    "boolean": ["bool", "boolean", "BooleanType"],
}
_TYPE_LISTS["float"] = _TYPE_LISTS["float"] + _TYPE_LISTS["integer"]


def _gx() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    try:
        import great_expectations as gx
    except ImportError as err:  # pragma: no cover - declared in the [quality] extra
        msg = "expectation suites need great-expectations: pip install 'hdp_spark[quality]'."
        raise EngineNotSupportedError(msg) from err
    return gx


def _rule_expectations(gx: Any, rule: Rule) -> list[Any]:
    from great_expectations.expectations.row_conditions import Column

    ex = gx.expectations
    meta = {"hdp_rule": rule.key}
    c = rule.column
    kind = rule.kind
    if kind is RuleKind.MISSING:
        return [ex.ExpectColumnValuesToNotBeNull(column=c, meta=meta)]
    if kind is RuleKind.NEGATIVE:
        return [ex.ExpectColumnValuesToBeBetween(column=c, min_value=0, meta=meta)]
    if kind is RuleKind.ZERO:
        return [ex.ExpectColumnValuesToNotBeInSet(column=c, value_set=[0.0], meta=meta)]
    if kind is RuleKind.POSINF:
        return [ex.ExpectColumnValuesToBeBetween(column=c, max_value=_FMAX, meta=meta)]
    if kind is RuleKind.NONFINITE:
        return [ex.ExpectColumnValuesToBeBetween(column=c, min_value=-_FMAX, max_value=_FMAX,
                                                 meta=meta)]
    if kind is RuleKind.EPS_RANGE:
        lo, hi = rule.params
        positive_finite = (Column(c) > 0) & (Column(c) <= _FMAX)
        return [ex.ExpectColumnValuesToBeBetween(column=c, min_value=lo, max_value=hi,
                                                 row_condition=positive_finite, meta=meta)]
    if kind is RuleKind.BOUNDS:
        lo, hi = rule.params
        finite = (Column(c) >= -_FMAX) & (Column(c) <= _FMAX)
        return [ex.ExpectColumnValuesToBeBetween(column=c, min_value=lo, max_value=hi,
                                                 row_condition=finite, meta=meta)]
    if kind is RuleKind.DOMAIN:
        return [ex.ExpectColumnValuesToBeInSet(column=c, value_set=list(rule.params), meta=meta)]
    if kind is RuleKind.DUPLICATE:
        return [ex.ExpectColumnValuesToBeUnique(column=c, meta=meta)]
    if kind is RuleKind.MIN_ROWS:
        return [ex.ExpectTableRowCountToBeBetween(min_value=int(rule.params[0]), meta=meta)]
    return []  # EPS_VARIES: no portable GE expectation (documented above)


def expectation_suite(schema: TableSchema, *, name: str | None = None) -> ExpectationSuite:
    """Build a great_expectations ``ExpectationSuite`` from a schema.

    The suite has, for every declared column, ``ExpectColumnToExist`` and
    ``ExpectColumnValuesToBeInTypeList`` (pandas and Spark type names), then one
    expectation per schema rule (see the module docstring for the two exceptions).
    It works on pandas and Spark batches alike.

    Args:
        schema: the table schema.
        name: suite name (default ``"hdp_spark.<schema name>"``).

    Returns:
        A new, unsaved ``great_expectations.ExpectationSuite``.

    Raises:
        ParameterError: ``schema`` is not a TableSchema.
        EngineNotSupportedError: great-expectations is not installed.
    """
    if not isinstance(schema, TableSchema):
        msg = f"`schema` must be a TableSchema, got {type(schema).__name__}."
        raise ParameterError(msg)
    gx = _gx()
    expectations: list[Any] = []
    for col in schema.column_names:
        declared = schema.declared_type(col)
        assert declared is not None
        meta = {"hdp_rule": f"{col}:type"}
        expectations.append(gx.expectations.ExpectColumnToExist(column=col, meta=meta))
        expectations.append(gx.expectations.ExpectColumnValuesToBeInTypeList(
            column=col, type_list=list(_TYPE_LISTS[declared]), meta=meta))
    for rule in schema.rules("all"):
        expectations.extend(_rule_expectations(gx, rule))
    # Built in one go: `add_expectation` would need (and save to) an active GE context.
    suite: ExpectationSuite = gx.ExpectationSuite(
        name=name or f"hdp_spark.{schema.name}", expectations=expectations
    )
    return suite


def run_expectations(df: Any, schema: TableSchema | ExpectationSuite) -> dict[str, Any]:
    """Run a schema's GE suite on a pandas or Spark DataFrame; return a summary of counts.

    Runs offline in an ephemeral GE context (nothing is saved, nothing is sent). The
    summary holds no data values: GE's unexpected-value lists and observed values are
    dropped, only counts and verdicts are kept.

    Args:
        df: a pandas or (classic) Spark DataFrame.
        schema: a TableSchema (its suite is built with :func:`expectation_suite`) or a
            ready ExpectationSuite.

    Returns:
        ``{"suite", "success", "statistics", "results": [...]}``; each result has
        ``expectation`` (GE type), ``column``, ``rule`` (the ``hdp_rule`` meta),
        ``success``, ``unexpected_count``, ``element_count`` and ``raised_exception``.

    Raises:
        EngineNotSupportedError: ``df`` is neither pandas nor Spark, or GE is missing.

    Privacy:
        For the trusted operator's data-quality report only, never for publication or for
        deciding whether to release (the counts depend on private values).
    """
    gx = _gx()
    suite = expectation_suite(schema) if isinstance(schema, TableSchema) else schema
    module = type(df).__module__
    context = gx.get_context(mode="ephemeral")
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    if module.startswith("pandas"):
        source = context.data_sources.add_pandas("hdp_spark")
    elif module.startswith("pyspark"):
        source = context.data_sources.add_spark("hdp_spark")
    else:
        msg = f"`df` must be a pandas or Spark DataFrame, got {type(df).__name__}."
        raise EngineNotSupportedError(msg)
    batch = (
        source.add_dataframe_asset("table")
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": df})
    )
    result = batch.validate(
        suite, result_format={"result_format": "BASIC", "partial_unexpected_count": 0}
    ).to_json_dict()
    results = []
    for r in result["results"]:
        config = r["expectation_config"]
        body = r.get("result") or {}
        exception = r.get("exception_info") or {}
        results.append({
            "expectation": config["type"],
            "column": config["kwargs"].get("column"),
            "rule": (config.get("meta") or {}).get("hdp_rule"),
            "success": bool(r["success"]),
            "unexpected_count": body.get("unexpected_count"),
            "element_count": body.get("element_count"),
            "raised_exception": bool(exception.get("raised_exception", False)),
        })
    return {
        "suite": suite.name,
        "success": bool(result["success"]),
        "statistics": dict(result["statistics"]),
        "results": results,
    }
