"""Partial (per-attribute) differential privacy, engine-agnostic (Ghazi et al.).

* :mod:`.spec` / :mod:`.api` -- public domains and validated specs, ``hdp_heavy_hitters``;
* :mod:`.budget` -- the corrected ε_tree + ε_count split, release and detection figures;
* :mod:`.tree` -- the attribute tree and the per-level requests engines answer;
* :mod:`.heavy_hitters` -- driver decisions, count stage and report;
* :mod:`.histograms` -- per-attribute histograms (parallel composition);
* :mod:`.projection` / :mod:`.consistency` -- marginals by the projection mechanism
  (discrete Gaussian noise, then projection onto consistent marginals);
* :mod:`.mwem` -- partial-DP MWEM over marginal queries;
* :mod:`.privacy` -- exact worst-case loss calculator (test oracle);
* :mod:`.accounting` -- per-attribute / per-person / zCDP conversions.
"""

from __future__ import annotations

from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.heavy_hitters import (
    HeavyHittersReport,
    HeavyHittersResult,
    TreeCounter,
    run_heavy_hitters,
)
from hdp_spark.core.partial.histograms import HistogramReport, HistogramResult, finalize_histograms
from hdp_spark.core.partial.projection import (
    MarginalsReport,
    MarginalsResult,
    MarginalsSpec,
    hdp_marginals,
)
from hdp_spark.core.partial.spec import AttributeDomain, AttributeHistogramSpec, HeavyHittersSpec

__all__ = [
    "AttributeDomain",
    "AttributeHistogramSpec",
    "HeavyHittersReport",
    "HeavyHittersResult",
    "HeavyHittersSpec",
    "HistogramReport",
    "HistogramResult",
    "MarginalsReport",
    "MarginalsResult",
    "MarginalsSpec",
    "TreeCounter",
    "attribute_histogram_spec",
    "finalize_histograms",
    "hdp_heavy_hitters",
    "hdp_marginals",
    "run_heavy_hitters",
]
