"""Benchmark: heterogeneous-DP histogram vs native Spark ``groupBy(category).count()``.

Both run on the same cached DataFrame (``--rows`` rows, ``--categories`` string labels,
``--levels`` distinct ε values, 2 % out-of-domain values and 1 % nulls), interleaved, and
the median of ``--repeats`` runs is reported with the ratio. The DP side is the whole
release: one Spark job (ε level + category match per row, ``groupBy(level, category)``
count), the driver finalize (weights, exact noise on every bin) and the output DataFrame.

``--encodings`` also times ways of matching the category natively (see
``hdp_spark/spark/_histogram.py``): the ``isin`` mask used by the library, a ``when`` chain,
a literal map lookup, ``array_position`` and a broadcast join with the domain table.

Usage::

    .venv/bin/python benchmarks/bench_histogram.py --rows 1000000
    .venv/bin/python benchmarks/bench_histogram.py --rows 10000000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.spark import histogram, histogram_tables
from hdp_spark.spark.expressions import level_expr

EPS_LEVELS = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, float("inf"), 0.02, 10.0, 20.0, 50.0]


def session(partitions: int) -> SparkSession:
    return (
        SparkSession.builder.master("local[2]")
        .appName("bench_histogram")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )


def build(spark: SparkSession, rows: int, k: int, levels: int) -> DataFrame:
    """Cached table: category (string, 2 % out of domain, 1 % null) and ε (``levels`` values)."""
    bucket = F.abs(F.xxhash64(F.col("id"))) % 1000
    label = F.concat(F.lit("cat_"), F.lpad((F.abs(F.xxhash64(F.col("id"), F.lit(1))) % k)
                                           .cast("string"), 3, "0"))
    category = (
        F.when(bucket < 10, F.lit(None).cast("string"))
        .when(bucket < 30, F.concat(F.lit("unknown_"), (bucket % 7).cast("string")))
        .otherwise(label)
    )
    eps_arr = F.array(*[F.lit(x) for x in EPS_LEVELS[:levels]])
    eps = F.element_at(eps_arr, (F.abs(F.xxhash64(F.col("id"), F.lit(2))) % levels + 1)
                       .cast("int"))
    df = spark.range(rows).select(category.alias("category"), eps.alias("eps")).cache()
    df.count()
    return df


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def encodings(df: DataFrame, cats: list[str]) -> dict[str, Callable[[], Any]]:
    lvl = level_expr("eps", None).alias("__level")
    col = F.col("category")
    k = len(cats)

    def mask_isin() -> Any:
        return df.select(lvl, F.when(col.isin(cats), col).alias("c")).groupBy(
            "__level", "c").count().collect()

    def when_chain() -> Any:
        e = F.when(col == cats[0], 0)
        for i, c in enumerate(cats[1:], 1):
            e = e.when(col == c, i)
        return df.select(lvl, e.otherwise(k).alias("c")).groupBy("__level", "c").count().collect()

    mapping = F.create_map(*[x for i, c in enumerate(cats) for x in (F.lit(c), F.lit(i))])

    def map_lookup() -> Any:
        e = F.coalesce(F.element_at(mapping, col), F.lit(k))
        return df.select(lvl, e.alias("c")).groupBy("__level", "c").count().collect()

    def array_position() -> Any:
        e = F.array_position(F.array(*[F.lit(c) for c in cats]), col)
        return df.select(lvl, e.alias("c")).groupBy("__level", "c").count().collect()

    domain = df.sparkSession.createDataFrame(
        [(c, i) for i, c in enumerate(cats)], "category string, __code int"
    )

    def broadcast_join() -> Any:
        j = df.join(F.broadcast(domain), on="category", how="left")
        return j.select(lvl, F.coalesce(F.col("__code"), F.lit(k)).alias("c")).groupBy(
            "__level", "c").count().collect()

    return {
        "mask_isin (library)": mask_isin,
        "when_chain": when_chain,
        "map_lookup": map_lookup,
        "array_position": array_position,
        "broadcast_join": broadcast_join,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--categories", type=int, default=100)
    parser.add_argument("--levels", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--encodings", action="store_true")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be >= 3 (the median of at least three runs)")
    if not 1 <= args.levels <= len(EPS_LEVELS):
        parser.error(f"--levels must be in [1, {len(EPS_LEVELS)}]")

    spark = session(args.partitions)
    spark.sparkContext.setLogLevel("ERROR")
    t0 = time.perf_counter()
    df = build(spark, args.rows, args.categories, args.levels)
    build_s = time.perf_counter() - t0
    cats = [f"cat_{i:03d}" for i in range(args.categories)]
    spec = hdp_histogram("category", eps="eps", categories=cats)

    def native() -> Any:
        return df.groupBy("category").count().collect()

    def release() -> Any:
        return histogram(df, spec).collect()

    def spark_part() -> Any:
        return histogram_tables(df, spec, (), None)

    fns: dict[str, Callable[[], Any]] = {
        "native groupBy(category).count()": native,
        "hdp histogram (full release)": release,
        "hdp histogram_tables (Spark job only)": spark_part,
    }
    if args.encodings:
        fns |= encodings(df, cats)
    for fn in fns.values():  # warm-up (JIT, codegen)
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.repeats):
        for name, fn in fns.items():  # interleaved
            times[name].append(timed(fn))
    med = {name: statistics.median(v) for name, v in times.items()}
    base = med["native groupBy(category).count()"]
    print(f"rows={args.rows:,} categories={args.categories} eps_levels={args.levels} "
          f"repeats={args.repeats} partitions={args.partitions} (table built+cached in "
          f"{build_s:.1f}s)")
    for name, value in med.items():
        runs = ", ".join(f"{x:.3f}" for x in times[name])
        print(f"  {name:40s} median {value:7.3f}s  ratio {value / base:5.2f}x  [{runs}]")
    print(json.dumps({"rows": args.rows, "categories": args.categories, "levels": args.levels,
                      "median_s": med, "ratio_full_release": med["hdp histogram (full release)"]
                      / base, "runs": times}))
    spark.stop()


if __name__ == "__main__":
    main()
