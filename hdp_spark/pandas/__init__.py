"""pandas backend: the same aggregators, keywords and output columns as :mod:`hdp_spark.spark`.

Usage::

    import hdp_spark.pandas as hpd
    hpd.agg(pdf, hpd.hdp_mean("salary", eps="eps", lower=0, upper=250_000))

Every release function is the one front function of :mod:`hdp_spark.front` bound to
:class:`~hdp_spark.pandas.engine.PandasEngine` (its documentation is there, shared with
Spark); this package adds the pandas engine's own pieces: ``level_tables`` and
``histogram_tables`` (exact pre-noise cells, for tests), ``ldp_oracle``, ``ldp_simulate``,
``ldp_tables`` and ``validate``.
"""

from __future__ import annotations

from hdp_spark.aggregators import (
    SelectKeys,
    hdp_heavy_hitters,
    hdp_histogram,
    hdp_marginals,
    hdp_mean,
    hdp_mwem,
    hdp_user_mean,
    ldp_distribution,
    ldp_mean,
    ldp_mean_vector,
    select_keys,
)
from hdp_spark.core.levels import EpsGrid
from hdp_spark.front import histogram as _front_histogram
from hdp_spark.front import ldp as _front_ldp
from hdp_spark.front import partial as _front_partial
from hdp_spark.front import release as _front_release
from hdp_spark.front import user_mean as _front_user_mean
from hdp_spark.front.bind import bind
from hdp_spark.pandas._histogram import histogram_tables
from hdp_spark.pandas._mean import level_tables
from hdp_spark.pandas.engine import PandasEngine
from hdp_spark.pandas.ldp import ldp_oracle, ldp_simulate, ldp_tables
from hdp_spark.pandas.schema import validate

__all__ = [
    "EpsGrid", "SelectKeys", "agg", "attribute_histograms", "explain", "hdp_heavy_hitters",
    "hdp_histogram", "hdp_marginals", "hdp_mean", "hdp_mwem", "hdp_user_mean",
    "heavy_hitters", "histogram", "histogram_release", "histogram_tables", "ldp_agg",
    "ldp_distribution", "ldp_mean", "ldp_mean_vector", "ldp_oracle", "ldp_release",
    "ldp_simulate", "ldp_tables", "level_tables", "marginals", "mwem", "release",
    "release_heavy_hitters", "release_histograms", "release_marginals", "select_keys",
    "user_mean", "user_mean_release", "validate",
]

_HERE = __name__
agg = bind(_front_release.agg, PandasEngine, _HERE)
release = bind(_front_release.release, PandasEngine, _HERE)
explain = bind(_front_release.explain, PandasEngine, _HERE)
histogram = bind(_front_histogram.histogram, PandasEngine, _HERE)
histogram_release = bind(_front_histogram.histogram_release, PandasEngine, _HERE)
user_mean = bind(_front_user_mean.user_mean, PandasEngine, _HERE)
user_mean_release = bind(_front_user_mean.user_mean_release, PandasEngine, _HERE)
heavy_hitters = bind(_front_partial.heavy_hitters, PandasEngine, _HERE)
release_heavy_hitters = bind(_front_partial.release_heavy_hitters, PandasEngine, _HERE)
marginals = bind(_front_partial.marginals, PandasEngine, _HERE)
release_marginals = bind(_front_partial.release_marginals, PandasEngine, _HERE)
mwem = bind(_front_partial.mwem, PandasEngine, _HERE)
attribute_histograms = bind(_front_partial.attribute_histograms, PandasEngine, _HERE)
release_histograms = bind(_front_partial.release_histograms, PandasEngine, _HERE)
ldp_agg = bind(_front_ldp.ldp_agg, PandasEngine, _HERE)
ldp_release = bind(_front_ldp.ldp_release, PandasEngine, _HERE)
