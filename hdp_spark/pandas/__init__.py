"""pandas backend: the same aggregators, keywords and output columns as :mod:`hdp_spark.spark`.

Usage::

    import hdp_spark.pandas as hpd
    hpd.agg(pdf, hpd.hdp_mean("salary", eps="eps", lower=0, upper=250_000))
"""

from __future__ import annotations

from hdp_spark.core.levels import EpsGrid
from hdp_spark.pandas.release import agg, level_tables, release
from hdp_spark.specs import hdp_mean

__all__ = ["EpsGrid", "agg", "hdp_mean", "level_tables", "release"]
