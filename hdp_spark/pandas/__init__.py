"""pandas backend: the same aggregators, keywords and output columns as :mod:`hdp_spark.spark`.

Usage::

    import hdp_spark.pandas as hpd
    hpd.agg(pdf, hpd.hdp_mean("salary", eps="eps", lower=0, upper=250_000))
"""

from __future__ import annotations

from hdp_spark.core.levels import EpsGrid
from hdp_spark.pandas._agg import agg, explain, release
from hdp_spark.pandas._mean import level_tables
from hdp_spark.pandas.schema import validate
from hdp_spark.specs import hdp_mean

__all__ = ["EpsGrid", "agg", "explain", "hdp_mean", "level_tables", "release", "validate"]

from hdp_spark.pandas._user_mean import hdp_user_mean, user_mean, user_mean_release

__all__ += ["hdp_user_mean", "user_mean", "user_mean_release"]

from hdp_spark.histograms import hdp_histogram  # noqa: E402
from hdp_spark.pandas._histogram import histogram, histogram_release, histogram_tables  # noqa: E402

__all__ += ["hdp_histogram", "histogram", "histogram_release", "histogram_tables"]

from hdp_spark.ldp.aggregators import ldp_distribution, ldp_mean, ldp_mean_vector  # noqa: E402
from hdp_spark.pandas.ldp import (  # noqa: E402
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
from hdp_spark.pandas._heavy_hitters import (  # noqa: E402
    attribute_histograms,
    heavy_hitters,
    marginals,
    mwem,
)

__all__ += ["attribute_histograms", "hdp_heavy_hitters", "hdp_marginals", "hdp_mwem",
            "heavy_hitters", "marginals", "mwem"]

from hdp_spark.core.selection import SelectKeys, select_keys  # noqa: E402

__all__ += ["SelectKeys", "select_keys"]
