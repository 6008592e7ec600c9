"""The Spark bridge of the ledger (:class:`~hdp_spark.ledger.base.FrameIO`): ledger frames as
Spark DataFrames. Ledger frames have two columns, ``user_id`` (string) and ``units`` (int64 ε
units)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN

__all__ = ["SparkIO"]


class SparkIO:
    """Ledger frames as Spark DataFrames (parquet read and written by the executors)."""

    name = "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    @staticmethod
    def _schema() -> Any:
        return T.StructType(
            [
                T.StructField(USER_COLUMN, T.StringType(), False),
                T.StructField(UNITS_COLUMN, T.LongType(), False),
            ]
        )

    def from_pairs(self, users: list[str], units: list[int]) -> Any:
        """A ledger frame from Python lists."""
        return self.spark.createDataFrame(
            list(zip(users, units, strict=True)), schema=self._schema()
        )

    def to_pairs(self, frame: Any) -> tuple[list[str], list[int]]:
        """Python lists from a ledger frame (collected on the driver)."""
        rows = frame.select(USER_COLUMN, UNITS_COLUMN).collect()
        return [str(r[0]) for r in rows], [int(r[1]) for r in rows]

    def to_arrow(self, frame: Any) -> Any:
        """The frame as a ``pyarrow.Table`` (collected on the driver through Arrow)."""
        import pyarrow as pa

        table = frame.select(
            F.col(USER_COLUMN).cast("string"), F.col(UNITS_COLUMN).cast("long")
        ).toArrow()
        return pa.table({
            USER_COLUMN: table.column(USER_COLUMN).cast(pa.string()),
            UNITS_COLUMN: table.column(UNITS_COLUMN).cast(pa.int64()),
        })

    def from_arrow(self, table: Any) -> Any:
        """A ledger frame from a ``pyarrow.Table`` (sent to Spark through Arrow)."""
        return self.spark.createDataFrame(table.to_pandas(), schema=self._schema())

    def _sum(self, frame: Any) -> Any:
        return frame.groupBy(USER_COLUMN).agg(
            F.sum(UNITS_COLUMN).cast("long").alias(UNITS_COLUMN)
        )

    def read_parquet(self, paths: list[str]) -> Any:
        """Per-user sum over parquet directories."""
        if not paths:
            return self.from_pairs([], [])
        frame = self.spark.read.schema(self._schema()).parquet(*paths)
        return self._sum(frame)

    def write_parquet(self, frame: Any, path: str) -> None:
        """Write a ledger frame as a new parquet directory (fails if it exists): sorted by
        user id within each file, dictionary-encoded and zstd-compressed by Spark's writer."""
        (
            frame.select(USER_COLUMN, UNITS_COLUMN)
            .sortWithinPartitions(USER_COLUMN)  # neighbouring ids share prefixes
            .write.mode("errorifexists").option("compression", "zstd").parquet(path)
        )

    def compact(self, paths: list[str], path: str) -> int:
        """Write the per-user sum over ``paths`` as a new parquet directory ``path`` (a
        snapshot); returns its row count (from the written files' footers)."""
        self.write_parquet(self.read_parquet(paths), path)
        return int(self.spark.read.schema(self._schema()).parquet(path).count())

    def add(self, left: Any, right: Any) -> Any:
        """Per-user sum of two ledger frames."""
        return self._sum(
            left.select(USER_COLUMN, UNITS_COLUMN).unionByName(
                right.select(USER_COLUMN, UNITS_COLUMN)
            )
        )
