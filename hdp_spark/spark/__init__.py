"""Spark backend (classic PySpark and Spark Connect): same API as :mod:`hdp_spark.pandas`.

Usage::

    import hdp_spark.spark as hs
    hs.agg(df, hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000))     # a release
    df.groupBy("dept").agg(hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000))
                                                                   # a Column aggregator

The data never leaves the executors: per row only native column expressions run (clamp,
fixed-point encoding, ε -> level), per (group, ε level) native ``count``/``sum``
aggregates, and the driver finalizes the small level table.

Every release function is the one front function of :mod:`hdp_spark.front` bound to
:class:`~hdp_spark.spark.engine.SparkEngine` (its documentation is there, shared with
pandas). ``hdp_mean``, ``hdp_histogram``, ``hdp_user_mean``, ``hdp_heavy_hitters``,
``hdp_marginals``, ``hdp_mwem``, ``ldp_mean``, ``ldp_mean_vector`` and ``ldp_distribution``
here are Column aggregators (they also work as specs in ``hs.agg``, the partial-DP ones in
``hs.heavy_hitters``/``hs.marginals``/``hs.mwem`` and the local-DP ones in ``hs.ldp_agg``);
``attribute_histograms`` is a release when called with a DataFrame first and a Column
aggregator when called with a list of column names first. This package adds the Spark
engine's own pieces: ``configure``, ``register_sql``, ``level_tables``/``histogram_tables``,
``ldp_oracle``, ``ldp_simulate``, ``ldp_tables`` and ``validate``.
"""

from __future__ import annotations

from hdp_spark.aggregators import (
    SelectKeys,
    select_keys,
)
from hdp_spark.core.levels import EpsGrid
from hdp_spark.front import histogram as _front_histogram
from hdp_spark.front import ldp as _front_ldp
from hdp_spark.front import partial as _front_partial
from hdp_spark.front import release as _front_release
from hdp_spark.front import user_mean as _front_user_mean
from hdp_spark.front.bind import bind
from hdp_spark.spark._histogram import histogram_tables
from hdp_spark.spark._mean import level_tables
from hdp_spark.spark.columns import as_column, hdp_histogram, hdp_mean
from hdp_spark.spark.columns_ldp import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.spark.columns_marginals import (
    attribute_histograms_column,
    hdp_marginals,
    hdp_mwem,
)
from hdp_spark.spark.columns_partial import hdp_heavy_hitters
from hdp_spark.spark.columns_users import hdp_user_mean
from hdp_spark.spark.engine import SparkEngine
from hdp_spark.spark.extension import configure
from hdp_spark.spark.ldp import ldp_oracle, ldp_simulate, ldp_tables
from hdp_spark.spark.schema import validate
from hdp_spark.spark.sql_functions import register_sql

__all__ = [
    "EpsGrid", "SelectKeys", "agg", "as_column", "attribute_histograms", "configure", "explain",
    "hdp_heavy_hitters", "hdp_histogram", "hdp_marginals", "hdp_mean", "hdp_mwem",
    "hdp_user_mean", "heavy_hitters", "histogram", "histogram_release", "histogram_tables",
    "ldp_agg", "ldp_distribution", "ldp_mean", "ldp_mean_vector", "ldp_oracle", "ldp_release",
    "ldp_simulate", "ldp_tables", "level_tables", "marginals", "mwem", "register_sql",
    "release", "release_heavy_hitters", "release_histograms", "release_marginals",
    "select_keys", "user_mean", "user_mean_release", "validate",
]

_HERE = __name__
agg = bind(_front_release.agg, SparkEngine, _HERE)
release = bind(_front_release.release, SparkEngine, _HERE)
explain = bind(_front_release.explain, SparkEngine, _HERE)
histogram = bind(_front_histogram.histogram, SparkEngine, _HERE)
histogram_release = bind(_front_histogram.histogram_release, SparkEngine, _HERE)
user_mean = bind(_front_user_mean.user_mean, SparkEngine, _HERE)
user_mean_release = bind(_front_user_mean.user_mean_release, SparkEngine, _HERE)
heavy_hitters = bind(_front_partial.heavy_hitters, SparkEngine, _HERE)
release_heavy_hitters = bind(_front_partial.release_heavy_hitters, SparkEngine, _HERE)
marginals = bind(_front_partial.marginals, SparkEngine, _HERE)
release_marginals = bind(_front_partial.release_marginals, SparkEngine, _HERE)
mwem = bind(_front_partial.mwem, SparkEngine, _HERE)
attribute_histograms = bind(_front_partial.attribute_histograms, SparkEngine, _HERE,
                            columns=attribute_histograms_column)
release_histograms = bind(_front_partial.release_histograms, SparkEngine, _HERE)
ldp_agg = bind(_front_ldp.ldp_agg, SparkEngine, _HERE)
ldp_release = bind(_front_ldp.ldp_release, SparkEngine, _HERE)
