"""Heterogeneous-DP mean (HPM and ADPM): the specification and the shared parameter checks
(:mod:`.spec`), the driver-side weight solvers (:mod:`.weights`, also used by the histogram
and the user-level mean) and the finalize step with the privacy argument (:mod:`.finalize`);
the batch finalize of many groups at once (:mod:`.batch`, weights in :mod:`.batch_weights`),
bit for bit the scalar finalize's numbers."""

from __future__ import annotations

from hdp_spark.core.mean.finalize import (
    ADPM_C,
    LevelPrivacy,
    MeanResult,
    finalize_mean,
    level_privacy,
    mean_weights,
)
from hdp_spark.core.mean.spec import MEAN_METHODS, MeanMethod, MeanSpec
from hdp_spark.core.mean.weights import Weights

__all__ = [
    "ADPM_C",
    "MEAN_METHODS",
    "LevelPrivacy",
    "MeanMethod",
    "MeanResult",
    "MeanSpec",
    "Weights",
    "finalize_mean",
    "level_privacy",
    "mean_weights",
]
