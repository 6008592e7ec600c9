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
from hdp_spark.spark.column_finalize import NO_FINGERPRINT, arrow_finalize, struct_fields
from hdp_spark.spark.extension import ExtensionMissingError, analyzer_ready, install
from hdp_spark.spark.output import spark_type

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


def _histogram_finalize(key: ReleaseKey, kind: str, rtype: Any) -> Any:
    from hdp_spark.aggregators import hdp_histogram as spec_histogram

    def histogram_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array,
                           categories: pa.Array, method: pa.Array, beta: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=rtype)
        labels = list(_first(categories))
        domain = [str(c) for c in labels] if kind == "str" else [int(c) for c in labels]
        args: dict[str, Any] = {"eps": str(_first(eps)), "categories": domain,
                "other": "other" if kind == "str" else None}
        spec = spec_histogram(str(_first(column)), **args, **_options(method, beta))
        default = spec_histogram(str(_first(column)), **args)
        return arrow_finalize(spec, _call_key(key, spec, default), "bins", cells, rtype)

    return histogram_finalize


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
    ``hdp_mean(value, eps, lower, upper[, method[, beta]][, 'public'])`` and
    ``hdp_histogram(category, eps, array(...)[, method[, beta]][, 'public'])``, checked at
    analysis. In a grouped query the call needs the last argument ``'public'``, which
    declares the grouping values public (``hdp_mean(salary, eps, 0, 250000, 'public')``);
    without it the query fails at analysis. Needs a session built with :func:`configure`.

    Privacy:
        As :func:`hdp_mean` and :func:`hdp_histogram`. The registration holds one release
        key (fresh, or from ``unsafe_seed`` for tests) and every query is a release of its
        own: its noise is keyed by the registration's key derived with the fingerprint of
        what the query aggregates, each group's own grouping values and its exact
        statistics. Re-running one query on the same data repeats its numbers; two different
        queries (``WHERE id != 17`` against the whole table) draw independent noise even
        when their statistics are equal, and their ε add up. The same query over changed
        data repeats its numbers exactly when the statistics did not change: register again
        (a new key) for each scheduled run or snapshot.
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
    _, mean_type = _struct(spec_mean("x", eps="eps", lower=0, upper=1), "estimate")

    mean_arrow = to_arrow_type(mean_type)

    def mean_finalize(cells: pa.Array, column: pa.Array, eps: pa.Array, lower: pa.Array,
                      upper: pa.Array, method: pa.Array, beta: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=mean_arrow)
        args: dict[str, Any] = {"eps": str(_first(eps)), "lower": _number(_first(lower)),
                "upper": _number(_first(upper))}
        spec = spec_mean(str(_first(column)), **args, **_options(method, beta))
        default = spec_mean(str(_first(column)), **args)
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
