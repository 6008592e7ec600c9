"""Spark backend (classic PySpark and Spark Connect): same API as :mod:`hdp_spark.pandas`.

Usage::

    import hdp_spark.spark as hs
    hs.agg(df, hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000))

The data never leaves the executors: per row only native column expressions run (clamp,
fixed-point encoding, ε -> level), per (group, ε level) native ``count``/``sum``
aggregates, and the driver finalizes the small level table.
"""

from __future__ import annotations

from hdp_spark.core.levels import EpsGrid
from hdp_spark.spark.release import agg, level_tables, release
from hdp_spark.specs import hdp_mean

__all__ = ["EpsGrid", "agg", "hdp_mean", "level_tables", "release"]
