"""Shared helpers of the benchmarks: a local Spark session and interleaved timing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def spark_session(memory: str = "8g") -> Any:
    """A local[2] session sized for 10M cached rows."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("hdp_spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def interleaved(
    cases: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median wall time of each case, running the cases in turn (A, B, A, B, ...)."""
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}
