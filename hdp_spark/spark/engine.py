"""The Spark engine of the release pipeline (:class:`hdp_spark.core.pipeline.Engine`).

Classic PySpark and Spark Connect. Holds no aggregator logic: native cell queries
(``level_tables``, ``histogram_tables``, ``ldp_tables``: one Spark job each), the
interactive providers of the user-level mean and the heavy hitters, and a materialized
local frame typed by the kernels' output description (one schema builder for all).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.output_columns import OutputColumns
from hdp_spark.core.partial.spec import AttributeHistogramSpec, CodedSpec
from hdp_spark.core.pipeline import (
    CellRequest,
    Keys,
    OutputField,
    dispatch_cells,
)
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.user_mean import UserMeanSpec
from hdp_spark.spark._common import dataframe_schema, local_frame, mark_unsafe, release_keys
from hdp_spark.spark.output import spark_schema

__all__ = ["SparkEngine"]

class SparkEngine:
    """Engine over one Spark DataFrame."""

    def __init__(self, df: DataFrame, *, cached: bool = False) -> None:
        self.df = df
        # cached: the bounded rows of a privacy-unit release, persisted by cells() when
        # more than one pass reads them (one cell request is one pass: persisting rows
        # read once only costs the cache's build)
        self.cached = cached
        self.persisted = False

    def release_keys(self, keys: Any, by: tuple[str, ...]) -> Keys | None:
        return release_keys(self.df, keys, by)

    def check_schema(self, schema: TableSchema, specs: Sequence[object], by: Sequence[str]
                     ) -> None:
        from hdp_spark.spark.schema import check_release

        check_release(self.df, schema, specs, by)  # one aggregate job, counts only

    def report_marks(self) -> dict[str, str]:
        from hdp_spark.spark.ldp import report_marks

        return report_marks(dataframe_schema(self.df))

    def cells(self, requests: Sequence[CellRequest], by: tuple[str, ...], keys: Keys | None
              ) -> list[Mapping[tuple[object, ...], Any]]:
        from hdp_spark.spark._histogram import histogram_tables
        from hdp_spark.spark._mean import level_tables

        if self.cached and len(requests) > 1 and not self.persisted:
            self.df = self.df.persist(StorageLevel.MEMORY_AND_DISK)
            self.persisted = True
        from hdp_spark.spark.ldp import ldp_tables

        return dispatch_cells(requests, self.df, by, keys, levels=level_tables,
                              categories=histogram_tables, ldp=ldp_tables)

    @contextmanager
    def users(self, spec: UserMeanSpec, by: tuple[str, ...], keys: Keys) -> Iterator[Any]:
        from hdp_spark.spark._user_mean import SparkUsers

        backend = SparkUsers(self.df, spec, by, keys)
        try:
            yield backend
        finally:
            backend.close()

    @contextmanager
    def tree_counter(self, spec: CodedSpec) -> Iterator[Any]:
        from hdp_spark.spark._heavy_hitters import (
            SparkTreeCounter,
            _check_frame,
            bounded_persons,
        )

        df = bounded_persons(_check_frame(self.df), spec.privacy_unit, spec.max_rows)
        with SparkTreeCounter.from_frame(df, spec) as counter:
            yield counter

    def attribute_counts(self, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
        from hdp_spark.spark._heavy_hitters import attribute_counts

        return attribute_counts(self.df, spec)

    def bounded(self, unit: PrivacyUnit, eps: str, by: tuple[str, ...], keys: Keys | None,
                specs: Sequence[object], key: ReleaseKey) -> SparkEngine:
        from hdp_spark.spark.privacy_unit import bound_frame

        dataframe_schema(self.df)  # a Spark DataFrame, or ParameterError
        bounded = bound_frame(self.df, unit, eps=eps, by=by, keys=keys, specs=specs, key=key)
        # every cell request reads the bounded rows: one shuffle by person, not one each
        # (persisted by cells() when there are several; released by close() when the
        # release has its cells)
        return SparkEngine(bounded, cached=True)

    def ldp_bounded(self, unit: PrivacyUnit, spec: Any, key: ReleaseKey) -> SparkEngine:
        from hdp_spark.spark.privacy_unit import keep_one_report

        dataframe_schema(self.df)  # a Spark DataFrame, or ParameterError
        return SparkEngine(keep_one_report(self.df, unit, spec, key))

    def close(self) -> None:
        """Release what this engine cached (the bounded rows of a privacy-unit release)."""
        if self.persisted:
            self.df.unpersist()

    def public(self, columns: Sequence[str], constants: Mapping[str, float]) -> SparkEngine:
        df = self.df
        dataframe_schema(df)  # a Spark DataFrame, or ParameterError
        out = df.select(*[c for c in dict.fromkeys(columns) if c in df.columns])
        for name, value in constants.items():
            out = out.withColumn(name, F.lit(float(value)).cast("double"))
        return SparkEngine(out)

    def materialize(self, by: tuple[str, ...], columns: Sequence[tuple[str, OutputField]],
                    rows: list[tuple[Any, ...]] | OutputColumns, unsafe: bool) -> DataFrame:
        schema = spark_schema(self.df, by, columns)
        return mark_unsafe(local_frame(self.df.sparkSession, rows, schema), unsafe)
