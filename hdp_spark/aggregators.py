"""The public aggregator constructors, in one place (the backends re-export them).

Each returns a frozen, validated spec; the releases that take them are in
:mod:`hdp_spark.front` (bound by :mod:`hdp_spark.pandas` and :mod:`hdp_spark.spark`).
"""

from __future__ import annotations

from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.mwem import hdp_mwem
from hdp_spark.core.partial.projection import hdp_marginals
from hdp_spark.core.selection import SelectKeys, select_keys
from hdp_spark.core.user_mean import hdp_user_mean
from hdp_spark.histograms import hdp_histogram
from hdp_spark.ldp.aggregators import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.specs import hdp_mean

__all__ = [
    "SelectKeys",
    "attribute_histogram_spec",
    "hdp_heavy_hitters",
    "hdp_histogram",
    "hdp_marginals",
    "hdp_mean",
    "hdp_mwem",
    "hdp_user_mean",
    "ldp_distribution",
    "ldp_mean",
    "ldp_mean_vector",
    "select_keys",
]
