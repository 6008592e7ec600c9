"""The built-in aggregators' descriptors (see :mod:`hdp_spark.aggregators.registry`).

Loaded on the first registry lookup. Each entry is the whole list of facts the library
keeps about an aggregator; a new one is added the same way, here or from outside with
:func:`hdp_spark.register_aggregator`.
"""

from __future__ import annotations

from typing import Any

from hdp_spark.aggregators.histogram import hdp_histogram
from hdp_spark.aggregators.ldp import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.aggregators.mean import hdp_mean
from hdp_spark.aggregators.registry import Aggregator, register_aggregator
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernels import (
    HeavyHittersKernel,
    HistogramKernel,
    LdpKernel,
    MarginalsKernel,
    MeanKernel,
    MwemKernel,
    UserMeanKernel,
)
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.histogram_kernel import AttributeHistogramKernel
from hdp_spark.core.partial.mwem import MwemSpec, hdp_mwem
from hdp_spark.core.partial.projection import MarginalsSpec, hdp_marginals
from hdp_spark.core.partial.spec import AttributeHistogramSpec, HeavyHittersSpec
from hdp_spark.core.selection.kernels import SelectedHistogramKernel, SelectedMeanKernel
from hdp_spark.core.user_mean import UserMeanSpec, hdp_user_mean
from hdp_spark.explain import explain_specs
from hdp_spark.front.explain_hooks import explain_ldp_means, explain_user_means_public

__all__: list[str] = []


def _bounds(spec: Any) -> tuple[float, float]:
    return float(spec.lower), float(spec.upper)


_LDP = LdpKernel()
_RECORDS_COLUMN = "hdp_spark.spark.columns_marginals:column_for"
_LDP_COLUMN = "hdp_spark.spark.columns_ldp:column_for"

for _aggregator in (
    Aggregator("mean", (MeanSpec,), MeanKernel(), hdp_mean, column_field="estimate",
               sql="hdp_mean", job_kind="mean", explain=explain_specs,
               selected=SelectedMeanKernel(), output_range=_bounds),
    Aggregator("histogram", (HistogramSpec,), HistogramKernel(), hdp_histogram,
               column_field="bins", sql="hdp_histogram", job_kind="histogram",
               explain=explain_specs, selected=SelectedHistogramKernel()),
    Aggregator("user_mean", (UserMeanSpec,), UserMeanKernel(), hdp_user_mean,
               column_field="estimate", sql="hdp_user_mean",
               column_builder="hdp_spark.spark.columns_users:column_for",
               job_kind="user_mean", explain=explain_user_means_public,
               output_range=_bounds),
    Aggregator("heavy_hitters", (HeavyHittersSpec,), HeavyHittersKernel(),
               hdp_heavy_hitters, column_field="records", sql="hdp_heavy_hitters",
               column_builder="hdp_spark.spark.columns_partial:column_for",
               job_kind="heavy_hitters"),
    Aggregator("marginals", (MarginalsSpec,), MarginalsKernel(), hdp_marginals,
               column_field="cells", column_builder=_RECORDS_COLUMN, sql="hdp_marginals",
               job_kind="marginals"),
    Aggregator("mwem", (MwemSpec,), MwemKernel(), hdp_mwem, column_field="cells",
               column_builder=_RECORDS_COLUMN, sql="hdp_mwem", job_kind="mwem"),
    Aggregator("attribute_histograms", (AttributeHistogramSpec,),
               AttributeHistogramKernel(), attribute_histogram_spec, column_field="cells",
               column_builder=_RECORDS_COLUMN, sql="hdp_attribute_histograms"),
    Aggregator("ldp_mean", (LdpMeanSpec,), _LDP, ldp_mean, job_kind="ldp_mean",
               explain=explain_ldp_means, output_range=_bounds, column_field="estimate",
               column_builder=_LDP_COLUMN, sql="hdp_ldp_mean"),
    Aggregator("ldp_mean_vector", (LdpVectorMeanSpec,), _LDP, ldp_mean_vector,
               column_field="estimate", column_builder=_LDP_COLUMN),
    Aggregator("ldp_distribution", (LdpDistributionSpec,), _LDP, ldp_distribution,
               column_field="estimate", column_builder=_LDP_COLUMN, sql="hdp_ldp_distribution"),
):
    register_aggregator(_aggregator)
