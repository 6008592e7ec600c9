"""Speed of the heavy-hitters Column against the release API and Spark's own floor.

On one cached DataFrame of --rows rows with --attrs attributes (--size values each, skewed,
a few nulls), every case runs once after a warm-up, then --repeats rounds run every case
once in turn (the median of each case's wall time):

  floor    df.groupBy(*cols).count().collect()     (the distinct records' counts, native)
  column   df.agg(hdp_heavy_hitters(cols, ...)).collect()
  release  hs.agg(df, hdp_heavy_hitters(cols, ...)) (the release API: one pass per level)

Prints one line per case and the ratios column/release and column/floor.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--attrs", type=int, default=4)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    spark = (hs.configure(SparkSession.builder.master("local[2]"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cols = [f"a{j}" for j in range(a.attrs)]
    # attribute j: floor(size * u^2) (skewed towards 0), null when it reaches size
    exprs = [F.floor(F.lit(a.size + 1) * F.pow(F.rand(seed=j), 2)).cast("int").alias(c)
             for j, c in enumerate(cols)]
    df = spark.range(a.rows).select(*exprs)
    df = df.select(*[F.when(F.col(c) < a.size, F.col(c)).alias(c) for c in cols])
    df = df.localCheckpoint().cache()
    df.count()
    domains = {c: list(range(a.size)) for c in cols}
    col = hs.hdp_heavy_hitters(cols, domains=domains, eps0=1.0, delta=1e-6)
    cases: dict[str, Any] = {
        "floor": lambda: df.groupBy(*cols).count().collect(),
        "column": lambda: df.agg(col.alias("hh")).collect(),
        "release": lambda: hs.agg(df, col).collect(),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()
    for _ in range(a.repeats):
        for name, fn in cases.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows={a.rows} attrs={a.attrs} size={a.size} repeats={a.repeats}")
    for k, v in med.items():
        print(f"{k:8s} {v:7.3f} s  (runs: {', '.join(f'{x:.3f}' for x in times[k])})")
    print(f"column/release {med['column'] / med['release']:.2f}x  "
          f"column/floor {med['column'] / med['floor']:.2f}x  "
          f"release/floor {med['release'] / med['floor']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
