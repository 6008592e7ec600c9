"""The kernel of ``attribute_histograms`` (per-attribute histograms under per-attribute
DP; entered into the kernel table by :mod:`hdp_spark.core.kernels`), so ``agg`` and the
Spark Column find it like the other partial-DP aggregators: global only, one engine pass
(``engine.attribute_counts``), then
:func:`~hdp_spark.core.partial.histograms.finalize_histograms`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.histograms import (
    HISTOGRAM_COLUMNS,
    HistogramResult,
    finalize_histograms,
)
from hdp_spark.core.partial.spec import AttributeHistogramSpec
from hdp_spark.core.pipeline import Engine, OutputField

__all__ = ["ATTRIBUTE_HISTOGRAM_FIELDS", "AttributeHistogramKernel"]

ATTRIBUTE_HISTOGRAM_FIELDS: tuple[OutputField, ...] = tuple(
    OutputField(name, kind, nullable=name == "value")
    for name, kind in zip(HISTOGRAM_COLUMNS, ("str", "str", "int", "int", "int", "int"),
                          strict=True)
)
"""The long table of ``attribute_histograms``: attribute, value (null for the extra
"other" category), code, noisy_count, count_ci_low, count_ci_high."""


@dataclass(frozen=True, slots=True)
class AttributeHistogramKernel:
    """Per-attribute histograms (``attribute_histograms``): global only. Inside ``agg``:
    one list-of-struct column ``<name>`` (attribute, value, code, noisy_count,
    count_ci_low, count_ci_high), the release API's long table."""

    global_only = True

    def items(self, spec: AttributeHistogramSpec) -> tuple[OutputField, ...]:
        """The released table's columns."""
        return ATTRIBUTE_HISTOGRAM_FIELDS

    def fields(self, spec: AttributeHistogramSpec) -> tuple[OutputField, ...]:
        return (OutputField("", "list", self.items(spec)),)

    def run(self, spec: AttributeHistogramSpec, engine: Engine, by: tuple[str, ...],
            keys: tuple[tuple[object, ...], ...], key: ReleaseKey
            ) -> dict[tuple[object, ...], Any]:
        """The release of the whole table (one pass of exact per-attribute counts).

        Privacy:
            :func:`~hdp_spark.core.partial.histograms.finalize_histograms`: ε₀ per
            attribute, d·ε₀ per person (replacement neighbours, n public).
        """
        return {(): finalize_histograms(spec, engine.attribute_counts(spec), key)}

    def table_rows(self, spec: AttributeHistogramSpec, r: HistogramResult
                   ) -> list[tuple[Any, ...]]:
        """The released cells as tuples in the order of :meth:`items`."""
        return [tuple(row[c] for c in HISTOGRAM_COLUMNS) for row in r.rows]

    def values(self, spec: AttributeHistogramSpec, r: HistogramResult) -> tuple[Any, ...]:
        return ([dict(row) for row in r.rows],)
