"""Spark backend (classic PySpark and Spark Connect): same API as :mod:`hdp_spark.pandas`.

Usage::

    import hdp_spark.spark as hs
    hs.agg(df, hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000))     # a release
    df.groupBy("dept").agg(hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000))
                                                                   # a Column aggregator

The data never leaves the executors: per row only native column expressions run (clamp,
fixed-point encoding, ε -> level), per (group, ε level) native ``count``/``sum``
aggregates, and the driver finalizes the small level table.
"""

from __future__ import annotations

from hdp_spark.core.levels import EpsGrid
from hdp_spark.spark._agg import agg, explain, release
from hdp_spark.spark._mean import level_tables
from hdp_spark.spark.columns import hdp_histogram, hdp_mean
from hdp_spark.spark.extension import configure
from hdp_spark.spark.schema import validate
from hdp_spark.spark.sql_functions import register_sql

__all__ = ["EpsGrid", "agg", "configure", "explain", "hdp_mean", "level_tables", "register_sql",
           "release", "validate"]

from hdp_spark.spark._user_mean import hdp_user_mean, user_mean, user_mean_release

__all__ += ["hdp_user_mean", "user_mean", "user_mean_release"]

from hdp_spark.spark._histogram import histogram, histogram_release, histogram_tables  # noqa: E402

__all__ += ["hdp_histogram", "histogram", "histogram_release", "histogram_tables"]

from hdp_spark.ldp.aggregators import ldp_distribution, ldp_mean, ldp_mean_vector  # noqa: E402
from hdp_spark.spark.ldp import (  # noqa: E402
    ldp_agg,
    ldp_oracle,
    ldp_release,
    ldp_simulate,
    ldp_tables,
)

__all__ += ["ldp_agg", "ldp_distribution", "ldp_mean", "ldp_mean_vector", "ldp_oracle",
            "ldp_release", "ldp_simulate", "ldp_tables"]

from hdp_spark.core.partial.api import hdp_heavy_hitters  # noqa: E402
from hdp_spark.core.partial.mwem import hdp_mwem  # noqa: E402
from hdp_spark.core.partial.projection import hdp_marginals  # noqa: E402
from hdp_spark.spark._heavy_hitters import (  # noqa: E402
    attribute_histograms,
    heavy_hitters,
    marginals,
    mwem,
)

__all__ += ["attribute_histograms", "hdp_heavy_hitters", "hdp_marginals", "hdp_mwem",
            "heavy_hitters", "marginals", "mwem"]

from hdp_spark.core.selection import SelectKeys, select_keys  # noqa: E402

__all__ += ["SelectKeys", "select_keys"]
