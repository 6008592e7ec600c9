"""hdp_spark: differentially private aggregates where every row carries its own ε_i.

Engine-neutral entry points live here; the engines are :mod:`hdp_spark.pandas` and
:mod:`hdp_spark.spark` (imported lazily: importing this package needs neither).
"""

from __future__ import annotations

from hdp_spark.aggregators import hdp_mean
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import (
    DuplicateUserError,
    EngineNotSupportedError,
    EpsilonColumnError,
    HdpError,
    InternalError,
    ParameterError,
    SchemaError,
    UserIdError,
)
from hdp_spark.front.dispatch import agg
from hdp_spark.schema import TableSchema, ValidationReport, load_schema

__all__ = [
    "DuplicateUserError",
    "EngineNotSupportedError",
    "EpsGrid",
    "EpsilonColumnError",
    "HdpError",
    "InternalError",
    "MeanSpec",
    "ParameterError",
    "SchemaError",
    "TableSchema",
    "UserIdError",
    "ValidationReport",
    "__version__",
    "agg",
    "hdp_mean",
    "load_schema",
]

__version__ = "0.1.0"


from hdp_spark.aggregators import hdp_user_mean
from hdp_spark.core.user_mean import UserMeanSpec

__all__ += ["UserMeanSpec", "hdp_user_mean"]

from hdp_spark.aggregators import hdp_histogram  # noqa: E402
from hdp_spark.core.histogram.spec import HistogramSpec  # noqa: E402
from hdp_spark.front.dispatch import histogram  # noqa: E402

__all__ += ["HistogramSpec", "hdp_histogram", "histogram"]

from hdp_spark.ldp import (  # noqa: E402
    FrequencyOracle,
    LdpDistributionSpec,
    LdpMeanSpec,
    LdpVectorMeanSpec,
    ldp_distribution,
    ldp_mean,
    ldp_mean_vector,
)

__all__ += ["FrequencyOracle", "LdpDistributionSpec", "LdpMeanSpec", "LdpVectorMeanSpec",
            "ldp_distribution", "ldp_mean", "ldp_mean_vector"]

from hdp_spark.core.partial.api import hdp_heavy_hitters  # noqa: E402
from hdp_spark.core.partial.mwem import hdp_mwem  # noqa: E402
from hdp_spark.core.partial.projection import hdp_marginals  # noqa: E402

__all__ += ["hdp_heavy_hitters", "hdp_marginals", "hdp_mwem"]

from hdp_spark.core.selection import SelectKeys, select_keys  # noqa: E402

__all__ += ["SelectKeys", "select_keys"]

from hdp_spark.aggregators.registry import (  # noqa: E402
    Aggregator,
    SqlForm,
    aggregator_of,
    register_aggregator,
    unregister_aggregator,
)
from hdp_spark.aggregators.registry import (  # noqa: E402
    aggregators as registered_aggregators,  # not `aggregators`: that is the subpackage
)

__all__ += ["Aggregator", "SqlForm", "aggregator_of", "register_aggregator",
            "registered_aggregators", "unregister_aggregator"]
