"""The public aggregator constructors, in one place: the backends and the top-level
package re-export them from here.

Each returns a frozen, validated spec and reads no data. Defined here: ``hdp_mean``,
``hdp_histogram`` and the local-DP aggregators; the specs whose construction is part of a
core mechanism's validation (``hdp_user_mean``, the partial-DP ones, ``select_keys``) are
defined beside it in :mod:`hdp_spark.core` and exported from here. The releases that take
them are in :mod:`hdp_spark.front` (bound by :mod:`hdp_spark.pandas` and
:mod:`hdp_spark.spark`).
"""

from __future__ import annotations

from hdp_spark.aggregators.histogram import hdp_histogram
from hdp_spark.aggregators.ldp import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.aggregators.mean import hdp_mean
from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.mwem import hdp_mwem
from hdp_spark.core.partial.projection import hdp_marginals
from hdp_spark.core.selection import SelectKeys, select_keys
from hdp_spark.core.user_mean import hdp_user_mean

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
