"""Speed of the user-level mean Column against the release API and Spark's own floor.

On one cached DataFrame of --rows rows of --users users (1 to 2·rows/users - 1 rows each,
one ε per user, one of --groups public groups per user), every case runs once after a
warm-up, then --repeats rounds run every case once in turn (the median of each case's wall
time):

  floor    df.groupBy(*by, "user").agg(count, sum, min, max).groupBy(*by).count().collect()
           (Spark's own per-user pass, native)
  column   df.groupBy(*by).agg(hdp_user_mean(..., keys="public")).collect()
  release  hs.user_mean(df, <same spec>, by=..., keys=...).collect() (the release API)

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
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=100_000)
    p.add_argument("--groups", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    spark = (hs.configure(SparkSession.builder.master("local[2]"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    user = F.floor(F.rand(seed=1) * F.rand(seed=2) * F.lit(2 * a.users)) % a.users
    df = spark.range(a.rows).select(user.cast("long").alias("user"))
    per_user = F.xxhash64("user")
    df = df.select(
        "user",
        (F.abs(per_user % 1000) / 100.0 + F.randn(seed=3)).alias("x"),
        F.element_at(F.array(F.lit(0.5), F.lit(1.0), F.lit(2.0)),
                     (F.abs(per_user) % 3 + 1).cast("int")).alias("eps"),
        (F.abs(F.xxhash64("user", F.lit(7))) % max(a.groups, 1)).cast("string").alias("g"))
    df = df.localCheckpoint().cache()
    df.count()
    by = ["g"] if a.groups else []
    keys: Any = "public" if a.groups else None
    col = hs.hdp_user_mean("x", user="user", eps="eps", lower=0.0, upper=10.0, keys=keys)
    release_keys = [str(g) for g in range(a.groups)] if a.groups else None
    cases: dict[str, Any] = {
        "floor": lambda: df.groupBy(*by, "user").agg(
            F.count("*"), F.sum("x"), F.min("eps"), F.max("eps")).groupBy(*by).count().collect(),
        "column": lambda: df.groupBy(*by).agg(col.alias("m")).collect(),
        "release": lambda: hs.user_mean(df, col, by=by or None, keys=release_keys).collect(),
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
    print(f"rows={a.rows} users={a.users} groups={a.groups} repeats={a.repeats}")
    for k, v in med.items():
        print(f"{k:8s} {v:7.3f} s  (runs: {', '.join(f'{x:.3f}' for x in times[k])})")
    print(f"column/release {med['column'] / med['release']:.2f}x  "
          f"column/floor {med['column'] / med['floor']:.2f}x  "
          f"release/floor {med['release'] / med['floor']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
