"""Heterogeneous private frequencies (HPF), the central-DP histogram: the specification and
per-level weights (:mod:`.spec`), the finalize step with the privacy argument
(:mod:`.finalize`) and the engine-agnostic orchestration of one release (:mod:`.release`)."""

from __future__ import annotations

from hdp_spark.core.histogram.finalize import (
    HistogramResult,
    bin_statistics,
    finalize_histogram,
    integer_weights,
    level_loss_bounds,
    project_simplex,
    released_counts,
)
from hdp_spark.core.histogram.spec import (
    HISTOGRAM_METHODS,
    MAX_CATEGORIES,
    MAX_INT_LABEL,
    HistogramMethod,
    HistogramSpec,
    histogram_weights,
)

__all__ = [
    "HISTOGRAM_METHODS",
    "MAX_CATEGORIES",
    "MAX_INT_LABEL",
    "HistogramMethod",
    "HistogramResult",
    "HistogramSpec",
    "bin_statistics",
    "finalize_histogram",
    "histogram_weights",
    "integer_weights",
    "level_loss_bounds",
    "project_simplex",
    "released_counts",
]
