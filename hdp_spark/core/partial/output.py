"""The container both backends return from a partial-DP release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hdp_spark.core.partial.heavy_hitters import HeavyHittersReport
from hdp_spark.core.partial.histograms import HistogramReport
from hdp_spark.core.partial.projection import MarginalsReport

__all__ = ["PartialRelease"]


@dataclass(frozen=True, slots=True)
class PartialRelease:
    """A materialized partial-DP release.

    Attributes:
        table: the released rows as the engine's DataFrame (pandas or Spark), built from
            driver-side values: reading it again never re-runs the mechanism.
        report: the public metadata (budgets, per-person conversion, guarantees); it is
            a function of the parameters only, never of the data.
    """

    table: Any
    report: HeavyHittersReport | HistogramReport | MarginalsReport | dict[str, Any]
