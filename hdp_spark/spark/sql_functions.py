"""The SQL form of the Column aggregators: ``hdp_mean(value, eps, lower, upper)`` and
``hdp_histogram(category, eps, array(...))``."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type

from hdp_spark.core.histogram.spec import HISTOGRAM_METHODS
from hdp_spark.core.kernels import kernel_of
from hdp_spark.core.mean.spec import MEAN_METHODS
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection.kernels import selected_kernel_of
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import InternalError
from hdp_spark.spark.column_finalize import NO_FINGERPRINT, arrow_finalize, struct_fields
from hdp_spark.spark.column_selection import (
    selected_finalize,
    selection_of,
    selection_weights,
)
from hdp_spark.spark.column_unit import UNIT_CONF, unit_conf
from hdp_spark.spark.extension import ExtensionMissingError, analyzer_ready, install
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.sql_generic import register_generic
from hdp_spark.spark.sql_ldp import register_ldp
from hdp_spark.spark.sql_partial import register_partial
from hdp_spark.spark.sql_users import register_user_mean

__all__ = ["HISTOGRAM_METHODS_CONF", "MEAN_METHODS_CONF", "register_sql"]

MEAN_METHODS_CONF = "hdp_spark.sql.meanMethods"
HISTOGRAM_METHODS_CONF = "hdp_spark.sql.histogramMethods"


def _number(v: Any) -> float:
    """A SQL literal bound as the Python spec holds it (integers stay integers: the bounds
    enter the noise context as written)."""
    return int(v) if float(v).is_integer() and not isinstance(v, float) else float(v)


def _struct(spec: Any, main: str) -> tuple[list[str], Any]:
    from pyspark.sql import types as T

    fields = struct_fields(kernel_of(spec).fields(spec), main)
    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])
    return [n for n, _ in fields], rtype


def _first(a: Any) -> Any:
    """The first value of an Arrow argument column (a constant of the call)."""
    return a[0].as_py()


def _options(method: Any, beta: Any) -> dict[str, Any]:
    """The SQL call's method and beta (empty and NaN: the defaults) as spec keywords."""
    m, b = str(_first(method)), float(_first(beta))
    options: dict[str, Any] = {}
    if m:
        options["method"] = m
    if not math.isnan(b):
        options["beta"] = b
    return options


def _call_key(key: ReleaseKey, spec: Any, default: Any) -> ReleaseKey:
    """The registration's key for a call with ``spec``'s method and beta: a choice other
    than the defaults derives its own key, so two calls of one registration that differ
    only in method or beta (equal cells, hence equal query fingerprints) never share
    noise; the defaults, written or not, keep the registration's key."""
    if (spec.method, spec.beta) == (default.method, default.beta):
        return key
    return key.for_query(f"sql-options:{spec.method}:{spec.beta!r}")


def _histogram_specs(kind: str, column: pa.Array, eps: pa.Array, categories: pa.Array,
                     method: pa.Array, beta: pa.Array) -> tuple[Any, Any]:
    """The spec of a SQL histogram call and the same call with the default options."""
    from hdp_spark.aggregators import hdp_histogram as spec_histogram

    labels = list(_first(categories))
    domain = [str(c) for c in labels] if kind == "str" else [int(c) for c in labels]
    args: dict[str, Any] = {"eps": str(_first(eps)), "categories": domain,
                            "other": "other" if kind == "str" else None}
    return (spec_histogram(str(_first(column)), **args, **_options(method, beta)),
            spec_histogram(str(_first(column)), **args))


def _mean_specs(column: pa.Array, eps: pa.Array, lower: pa.Array, upper: pa.Array,
                method: pa.Array, beta: pa.Array) -> tuple[Any, Any]:
    """The spec of a SQL mean call and the same call with the default options."""
    from hdp_spark.aggregators import hdp_mean as spec_mean

    args: dict[str, Any] = {"eps": str(_first(eps)), "lower": _number(_first(lower)),
                            "upper": _number(_first(upper))}
    return (spec_mean(str(_first(column)), **args, **_options(method, beta)),
            spec_mean(str(_first(column)), **args))


def _histogram_finalize(key: ReleaseKey, kind: str, rtype: Any) -> Any:
    def histogram_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array,
                           categories: pa.Array, method: pa.Array, beta: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=rtype)
        spec, default = _histogram_specs(kind, column, eps, categories, method, beta)
        return arrow_finalize(spec, _call_key(key, spec, default), "bins", cells, rtype)

    return histogram_finalize


def _selection(decision: pa.Array) -> SelectKeys:
    """The select_keys parameters the SQL call wrote (``'select', delta, c, share``)."""
    selection = selection_of(str(_first(decision)))
    if selection is None:  # the extension writes the decision: never a public one here
        msg = "a selection finalize needs a 'select' group decision"
        raise InternalError(msg)
    return selection


def _register_selection(session: Any, key: ReleaseKey) -> None:
    """The finalizes of the SQL calls under partition selection (``'select', δ, c, f``):
    ``<finalize>_select`` (the selection: W̃ or null, nondeterministic so that the
    extension's filter stays above it) and ``<finalize>_selected`` (the statistics)."""
    from pyspark.sql import types as T

    from hdp_spark.aggregators import hdp_histogram as spec_histogram
    from hdp_spark.aggregators import hdp_mean as spec_mean

    def mean_select(cells: pa.Array, column: pa.Array, eps: pa.Array, lower: pa.Array,
                    upper: pa.Array, method: pa.Array, beta: pa.Array,
                    decision: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=pa.int64())
        spec, default = _mean_specs(column, eps, lower, upper, method, beta)
        return selection_weights(spec, _call_key(key, spec, default), _selection(decision),
                                 cells)

    mean_type = _selected_struct(spec_mean("x", eps="eps", lower=0, upper=1), "estimate")
    mean_arrow = to_arrow_type(mean_type)

    def mean_selected(cells: pa.Array, column: pa.Array, eps: pa.Array, lower: pa.Array,
                      upper: pa.Array, method: pa.Array, beta: pa.Array, weights: pa.Array,
                      parts: pa.Array, decision: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=mean_arrow)
        spec, default = _mean_specs(column, eps, lower, upper, method, beta)
        return selected_finalize(spec, _call_key(key, spec, default), _selection(decision),
                                 cells, weights, parts, mean_arrow)

    udfs: dict[str, Any] = {
        "hdp_mean_finalize_select": F.arrow_udf(mean_select, T.LongType()).asNondeterministic(),  # type: ignore[attr-defined]  # design-ok: per group batch
        "hdp_mean_finalize_selected": F.arrow_udf(mean_selected, mean_type),  # type: ignore[attr-defined]  # design-ok: per group batch
    }
    for kind, probe in (("str", ["a"]), ("int", [0])):
        rtype = _selected_struct(spec_histogram("c", eps="eps", categories=probe,
                                                other="other" if kind == "str" else None),
                                 "bins")
        select, selected = _histogram_selection(key, kind, to_arrow_type(rtype))
        udfs[f"hdp_histogram_finalize_{kind}_select"] = F.arrow_udf(  # type: ignore[attr-defined]  # design-ok: per group batch
            select, T.LongType()).asNondeterministic()
        udfs[f"hdp_histogram_finalize_{kind}_selected"] = F.arrow_udf(selected, rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
    for name, udf in udfs.items():
        session.udf.register(name, udf)


def _selected_struct(spec: Any, main: str) -> Any:
    from pyspark.sql import types as T

    fields = struct_fields(selected_kernel_of(spec).fields(spec), main)
    return T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])


def _histogram_selection(key: ReleaseKey, kind: str, rtype: Any) -> tuple[Any, Any]:
    def histogram_select(cells: pa.Array, column: pa.Array, eps: pa.Array,
                         categories: pa.Array, method: pa.Array, beta: pa.Array,
                         decision: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=pa.int64())
        spec, default = _histogram_specs(kind, column, eps, categories, method, beta)
        return selection_weights(spec, _call_key(key, spec, default), _selection(decision),
                                 cells)

    def histogram_selected(cells: pa.Array, column: pa.Array, eps: pa.Array,
                           categories: pa.Array, method: pa.Array, beta: pa.Array,
                           weights: pa.Array, parts: pa.Array,
                           decision: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=rtype)
        spec, default = _histogram_specs(kind, column, eps, categories, method, beta)
        return selected_finalize(spec, _call_key(key, spec, default), _selection(decision),
                                 cells, weights, parts, rtype)

    return histogram_select, histogram_selected


def register_sql(session: Any, *, unsafe_seed: int | str | bytes | None = None) -> None:
    """Make ``hdp_mean`` and ``hdp_histogram`` usable in ``session.sql(...)``.

    ``SELECT dept, hdp_mean(salary, eps, 0, 250000) FROM employees GROUP BY dept`` and
    ``SELECT dept, hdp_histogram(region, eps, array('north', 'south')) FROM employees GROUP BY
    dept`` then return one struct column per call, with the fields of :func:`hdp_mean`'s and
    :func:`hdp_histogram`'s Columns (default method, β and fill; the domain is a constant
    array of strings or of integers). Each SQL function is the native aggregate of the JVM
    extension wrapped in a finalize registered here (``hdp_mean_finalize``,
    ``hdp_histogram_finalize_str``, ``hdp_histogram_finalize_int``).

    Optional trailing arguments, as Spark's ``percentile_approx(col, p, accuracy)``:
    ``hdp_mean(value, eps, lower, upper[, method[, beta]][, groups])`` and
    ``hdp_histogram(category, eps, array(...)[, method[, beta]][, groups])``, checked at
    analysis. In a grouped query the call needs a group decision ``groups``, or the query
    fails at analysis: ``'public'`` declares the grouping values public
    (``hdp_mean(salary, eps, 0, 250000, 'public')``); ``'select', delta, c, share`` selects
    the groups privately, as ``keys=select_keys(delta=, c=, share=)``
    (``hdp_mean(spend, eps, 0, 500, 'select', 1e-7, 1.0, 0.4)``: only selected groups
    have a row). Last, ``'unit', column, max_groups, max_rows`` releases under a privacy
    unit, as ``privacy_unit=`` (``hdp_mean(amount, eps, 0, 500, 'public', 'unit',
    'user_id', 3, 10)``; global or with ``'public'``; the default ``eps_cap`` and
    ``weight_share``). Needs a session built with :func:`configure`.

    Every aggregator registered with a generic SQL form (``register_aggregator``, its
    descriptor's ``sql_form``) before this call gets ``hdp_aggregate('<name>', ...)``
    (docs/extending.md).

    The partial-DP family: ``hdp_heavy_hitters``, ``hdp_marginals``, ``hdp_mwem`` and
    ``hdp_attribute_histograms(struct(col, ...), '<JSON options>'[, 'public'])``, the
    options being the release API's keywords (``'{"domains": {...}, "eps0": 1.0}'``, plus
    ``max_records``), with fixed result types (:mod:`hdp_spark.spark.sql_partial`,
    docs/columns.md, "The partial-DP family in SQL").

    The user-level mean: ``hdp_user_mean(value, eps, user, lower, upper[, '<JSON
    options>'][, 'public'])``, the options being the release API's other keywords
    (``'{"cap": "paper", "fill": 5}'``; :mod:`hdp_spark.spark.sql_users`). The scalar
    local-DP aggregators: ``hdp_ldp_mean(report, eps, '<JSON options>'[, 'public'])`` and
    ``hdp_ldp_distribution(index, sign, eps, '<JSON options>'[, 'public'])``, and globally
    under a privacy unit with ``'unit', column, 1, 1`` last (one report per person, its
    position placed by a secret key derived from the registration's and held by the JVM
    outside the conf and every printed plan: :mod:`hdp_spark.spark.sql_ldp`).

    Privacy:
        As :func:`hdp_mean` and :func:`hdp_histogram`. The registration holds one release
        key (fresh, or from ``unsafe_seed`` for tests) and every query is a release of its
        own: its noise is keyed by the registration's key derived with the fingerprint of
        what the query aggregates, each group's own grouping values and its exact
        statistics. Re-running one query on the same data repeats its numbers; two different
        queries (``WHERE id != 17`` against the whole table) draw independent noise even
        when their statistics are equal, and their ε add up. A rewritten file, a replaced
        view or table is another query (fresh noise); whatever could change the rows
        under one fingerprint (``current_timestamp()``, ``rand()``, ``LIMIT``,
        ``TABLESAMPLE``, order-dependent aggregates, unpinnable sources) is refused at
        analysis (docs/columns.md).
    """
    from hdp_spark.aggregators import hdp_histogram as spec_histogram
    from hdp_spark.aggregators import hdp_mean as spec_mean

    install(session)
    if not analyzer_ready(session):
        raise ExtensionMissingError(NO_FINGERPRINT)
    # the method names the SQL functions check at analysis (SqlOptions in the extension)
    session.conf.set(MEAN_METHODS_CONF, ",".join(MEAN_METHODS))
    session.conf.set(HISTOGRAM_METHODS_CONF, ",".join(HISTOGRAM_METHODS))
    key = ReleaseKey.resolve(unsafe_seed)
    session.conf.set(UNIT_CONF, unit_conf(key))  # the SQL form of the privacy unit
    _, mean_type = _struct(spec_mean("x", eps="eps", lower=0, upper=1), "estimate")

    mean_arrow = to_arrow_type(mean_type)

    def mean_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array, lower: pa.Array,
                      upper: pa.Array, method: pa.Array, beta: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=mean_arrow)
        spec, default = _mean_specs(column, eps, lower, upper, method, beta)
        return arrow_finalize(spec, _call_key(key, spec, default), "estimate", cells,
                              mean_arrow)

    udf = F.arrow_udf(mean_finalize, mean_type)  # type: ignore[attr-defined]  # design-ok: per group batch
    session.udf.register("hdp_mean_finalize", udf)
    for kind, probe in (("str", ["a"]), ("int", [0])):
        probe_spec = spec_histogram("c", eps="eps", categories=probe,
                                    other="other" if kind == "str" else None)
        _, rtype = _struct(probe_spec, "bins")
        udf = F.arrow_udf(_histogram_finalize(key, kind, to_arrow_type(rtype)), rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
        session.udf.register(f"hdp_histogram_finalize_{kind}", udf)
    _register_selection(session, key)
    register_generic(session, key)
    register_partial(session, key)
    register_user_mean(session, key)
    register_ldp(session, key)
