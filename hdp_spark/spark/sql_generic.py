"""The generic SQL form of registered aggregators: ``hdp_aggregate('<name>', ...)``.

The JVM extension's ``hdp_aggregate`` builds the native cells of an aggregator whose
descriptor has a :class:`~hdp_spark.aggregators.registry.SqlForm`, from the call's value
(or category) column, ε column and bounds (or domain), and calls
``hdp_aggregate_<name>_finalize``, registered here by :func:`register_generic` (called by
``register_sql``), with the call's constant JSON options.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type

from hdp_spark.aggregators.registry import Aggregator, aggregators
from hdp_spark.core.kernel_table import ensure_kernel
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import CategoryRequest, LevelRequest
from hdp_spark.errors import InternalError, ParameterError
from hdp_spark.spark.column_finalize import arrow_finalize, struct_fields
from hdp_spark.spark.output import spark_type

__all__ = ["GENERIC_CONF", "register_generic"]

GENERIC_CONF = "hdp_spark.sql.aggregates"
"""The session conf listing ``name:cells`` of every generic SQL form (read by the JVM)."""


def _first(a: pa.Array) -> Any:
    return a[0].as_py()


def _options(text: str, name: str) -> dict[str, Any]:
    try:
        options = json.loads(text)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        msg = (f"`options` of hdp_aggregate('{name}', ...) must be a JSON object such as "
               f"'{{}}', got {text!r}.")
        raise ParameterError(msg)
    return options


def _checked_spec(aggregator: Aggregator, column: str, eps: str, shape: Any,
                  options: dict[str, Any]) -> Any:
    """The call's spec, refused unless its kernel reads exactly the cells the call built
    (level cells with the call's bounds, midpoint fill and no ε grid; or category cells
    over the call's domain)."""
    form = aggregator.sql_form
    if form is None:  # registered only with a form
        msg = f"{aggregator.name} has no SQL form"
        raise InternalError(msg)
    spec = form.spec(column, eps, shape, options)
    request = aggregator.kernel.request(spec)  # type: ignore[attr-defined]
    if form.cells == "level":
        lo, hi = shape
        ok = (isinstance(request, LevelRequest) and spec.eps_grid is None
              and (float(spec.lower), float(spec.upper)) == (lo, hi)
              and float(spec.fill_value) == (lo + hi) / 2)
    else:
        ok = (isinstance(request, CategoryRequest) and spec.eps_grid is None
              and list(spec.categories) == list(shape))
    if not ok:
        msg = (f"the spec hdp_aggregate('{aggregator.name}', ...) builds must read the cells "
               "the SQL call computes (its bounds and midpoint fill, or its domain, and no "
               "eps_grid); fix the aggregator's SqlForm.spec.")
        raise ParameterError(msg)
    return spec


def _call_key(key: ReleaseKey, name: str, options: dict[str, Any]) -> ReleaseKey:
    """Each (aggregator, options) of one registration has its own key: calls that differ
    only in their options (equal cells, equal fingerprints) never share noise."""
    text = json.dumps(options, sort_keys=True, allow_nan=False, default=str)
    return key.for_query(f"sql-aggregate:{name}:{text}")


def _finalizer(aggregator: Aggregator, key: ReleaseKey, arrow_type: Any) -> Any:
    entry = (aggregator.spec_types, aggregator.kernel, aggregator.selected)
    name, main, form = aggregator.name, aggregator.column_field, aggregator.sql_form
    if form is None or main is None:  # registered only with both
        msg = f"{name} has no SQL form or Column field"
        raise InternalError(msg)

    def run(cells: pa.Array, column: pa.Array, eps: pa.Array, shape: Any,
            options: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=arrow_type)
        ensure_kernel(*entry)  # the executor's interpreter never saw the registration
        opts = _options(str(_first(options)), name)
        spec = _checked_spec(aggregator, str(_first(column)), str(_first(eps)), shape, opts)
        return arrow_finalize(spec, _call_key(key, name, opts), main, cells, arrow_type)

    if form.cells == "level":
        def level_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array, lower: pa.Array,
                           upper: pa.Array, options: pa.Array) -> pa.Array:
            bounds = (float(_first(lower)), float(_first(upper))) if len(cells) else (0, 1)
            if not all(math.isfinite(b) for b in bounds):  # the JVM checked them already
                msg = "`lower` and `upper` must be finite"
                raise ParameterError(msg)
            return run(cells, column, eps, bounds, options)

        return level_finalize

    def category_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array,
                          categories: pa.Array, options: pa.Array) -> pa.Array:
        domain = list(_first(categories)) if len(cells) else []
        return run(cells, column, eps, domain, options)

    return category_finalize


def register_generic(session: Any, key: ReleaseKey) -> None:
    """Register ``hdp_aggregate_<name>_finalize`` for every registered aggregator with a
    :class:`~hdp_spark.aggregators.registry.SqlForm` and a Column field, and list them in
    the session conf the JVM's ``hdp_aggregate`` reads.

    Privacy:
        As the aggregator's Column: the registration's ``key`` derived per (aggregator,
        options), then per query fingerprint and group, as every SQL call.
    """
    from pyspark.sql import types as T

    entries = []
    for aggregator in aggregators():
        form = aggregator.sql_form
        if form is None or aggregator.column_field is None:
            continue
        fields = struct_fields(aggregator.kernel.fields(form.probe), aggregator.column_field)
        rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])
        udf = F.arrow_udf(_finalizer(aggregator, key, to_arrow_type(rtype)), rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
        session.udf.register(f"hdp_aggregate_{aggregator.name}_finalize", udf)
        entries.append(f"{aggregator.name}:{form.cells}")
    session.conf.set(GENERIC_CONF, ",".join(entries))
