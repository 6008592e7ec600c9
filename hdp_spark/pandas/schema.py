"""pandas backend of schema validation: vectorized counts of rule violations.

Same rules, counts and error texts as :mod:`hdp_spark.spark.schema`; the tests compare the
two engines on random tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.schema import TableSchema
from hdp_spark.core.validation import (
    Rule,
    RuleKind,
    Scope,
    ValidationReport,
)
from hdp_spark.errors import ParameterError

__all__ = ["check_release", "validate"]

_INTEGER_HINT = "Hint: pandas stores integers with nulls as float; use dtype 'Int64'."


def _kind(series: pd.Series[Any]) -> str:
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if isinstance(dtype, pd.StringDtype) or pd.api.types.is_object_dtype(dtype):
        return "string"
    if isinstance(dtype, pd.CategoricalDtype):
        return _kind(pd.Series(dtype.categories))
    return "other"


def _floats(series: pd.Series[Any]) -> npt.NDArray[np.float64]:
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def _count(df: pd.DataFrame, rule: Rule) -> int:
    kind = rule.kind
    if kind is RuleKind.MIN_ROWS:
        return max(0, int(rule.params[0]) - len(df))
    s = df[rule.column]
    if kind is RuleKind.MISSING:
        return int(s.isna().sum())
    if kind is RuleKind.DOMAIN:
        return int((s.notna() & ~s.isin(list(rule.params))).sum())
    if kind is RuleKind.DUPLICATE:
        ids = s[s.notna()]
        return len(ids) - int(ids.nunique())
    if kind is RuleKind.EPS_VARIES:
        ids = df[rule.params[0]]
        eps = _floats(s)
        pairs = pd.DataFrame({"id": ids.to_numpy(), "eps": eps})[ids.notna().to_numpy()]
        # null and NaN ε count as one value (as on Spark); -0.0 == 0.0
        pairs["eps"] = pairs["eps"] + 0.0
        return int(len(pairs.drop_duplicates()) - pairs["id"].nunique())
    x = _floats(s)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(x)
        if kind is RuleKind.NEGATIVE:
            mask = x < 0
        elif kind is RuleKind.ZERO:
            mask = x == 0
        elif kind is RuleKind.POSINF:
            mask = np.isposinf(x)
        elif kind is RuleKind.NONFINITE:
            mask = np.isinf(x)
        elif kind is RuleKind.EPS_RANGE:
            lo, hi = rule.params
            outside = np.zeros(len(x), dtype=bool)
            if lo is not None:
                outside |= x < lo
            if hi is not None:
                outside |= x > hi
            mask = finite & (x > 0) & outside
        elif kind is RuleKind.BOUNDS:
            lo, hi = rule.params
            mask = finite & ((x < lo) | (x > hi))
        else:  # pragma: no cover - every kind is handled above
            msg = f"unknown rule kind {kind!r}"
            raise AssertionError(msg)
    return int(np.count_nonzero(mask))


def validate(df: pd.DataFrame, schema: TableSchema, *, scope: Scope = "all") -> ValidationReport:
    """Count the rule violations of a pandas table against a schema (counts, never data).

    Args:
        df: the table.
        schema: from :func:`hdp_spark.schema.load_schema` or built in code.
        scope: ``"all"`` (default) checks every rule, for the operator's data-quality
            report; ``"release"`` checks only the rules that block a release (ε column, user
            id column, row count), which is what ``agg(..., schema=...)`` runs.

    Returns:
        A :class:`~hdp_spark.core.validation.ValidationReport`.

    Raises:
        ParameterError: ``df`` or ``schema`` has the wrong type.
        SchemaError: a declared column is missing, or has the wrong type (subclasses
            :class:`~hdp_spark.errors.EpsilonColumnError` / ``UserIdError`` for the ε / id
            column). Violations of row rules are counted, not raised: call
            :meth:`~hdp_spark.core.validation.ValidationReport.raise_for_release`.

    Privacy:
        The report holds counts per rule, which depend on private values for value rules:
        it is for the trusted operator, never for publication or for gating a release.
    """
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    if not isinstance(schema, TableSchema):
        msg = f"`schema` must be a TableSchema, got {type(schema).__name__}."
        raise ParameterError(msg)
    rules = schema.rules(scope)
    observed = {str(c): (_kind(df[c]), f"dtype {df[c].dtype}") for c in df.columns}
    schema.check_columns(observed, scope, integer_hint=_INTEGER_HINT)
    counts = tuple(_count(df, rule) for rule in rules)
    return ValidationReport(schema.name, "pandas", scope, len(df), rules, counts)


def check_release(
    df: pd.DataFrame, schema: TableSchema, specs: Sequence[object], by: Sequence[str]
) -> None:
    """The schema step of a release: declared columns, then blocking rules; raise or pass.

    Runs before any statistic is computed, any noise drawn or any result object made, so a
    rejected release spends no budget.
    """
    if not isinstance(schema, TableSchema):
        msg = f"`schema` must be a TableSchema or None, got {type(schema).__name__}."
        raise ParameterError(msg)
    schema.check_reads(specs, by)
    validate(df, schema, scope="release").raise_for_release()
