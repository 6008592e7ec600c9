"""Run the issue's Column snippet in a separate Spark (Connect or local-cluster) and print
its numbers and the release API's as JSON. Used by test_column_sessions.py: a Connect
server or a cluster cannot share a JVM with the test run's classic session."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pandas as pd

CATS = ["north", "south", "east"]


def table() -> pd.DataFrame:
    rng = np.random.default_rng(12)
    n = 4000
    return pd.DataFrame({
        "salary": rng.uniform(0, 300_000, n),
        "eps": rng.choice([0.5, 1.0, 2.0, 4.0], n),
        "dept": rng.choice(["hr", "it", "ops"], n),
        "region": rng.choice([*CATS, "west"], n),
    })


def run(spark: Any) -> dict[str, Any]:
    import hdp_spark.spark as hs
    from hdp_spark.spark import hdp_histogram, hdp_mean

    df = spark.createDataFrame(table()).repartition(4)
    total = df.agg(hdp_mean("salary", eps="eps", lower=0, upper=250_000).unsafe_seed(3))
    grouped = df.groupBy("dept").agg(
        hdp_mean("salary", eps="eps", lower=0, upper=250_000).unsafe_seed(3).alias("salary"),
        hdp_histogram("region", eps="eps", categories=CATS).unsafe_seed(3),
    ).orderBy("dept")
    ref = hs.agg(df, hdp_mean("salary", eps="eps", lower=0, upper=250_000),
                 hdp_histogram("region", eps="eps", categories=CATS),
                 by="dept", keys=["hr", "it", "ops"], unsafe_seed=3).orderBy("dept")
    ref_total = hs.agg(df, hdp_mean("salary", eps="eps", lower=0, upper=250_000),
                       unsafe_seed=3)
    rows = grouped.collect()
    hs.register_sql(spark, unsafe_seed=3)
    df.createOrReplaceTempView("employees")
    sql = spark.sql("SELECT dept, hdp_mean(salary, eps, 0, 250000) AS s FROM employees "
                    "GROUP BY dept ORDER BY dept").collect()
    return {
        "sql": [r["s"]["estimate"] for r in sql],
        "session": type(spark).__module__,
        "total": total.collect()[0][0]["estimate"],
        "ref_total": ref_total.collect()[0]["salary_mean"],
        "mean": [r["salary"]["estimate"] for r in rows],
        "ref_mean": [r["salary_mean"] for r in ref.collect()],
        "bins": [[b["frequency"] for b in r["region_histogram"]["bins"]] for r in rows],
        "ref_bins": [[b["frequency"] for b in r["region_histogram"]] for r in ref.collect()],
    }


def main() -> None:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    mode = sys.argv[1]
    if mode == "connect-bare":  # a Connect server started without the extension
        spark = SparkSession.builder.remote("local[2]").getOrCreate()
        from hdp_spark.spark import hdp_mean

        df = spark.createDataFrame(table())
        out: dict[str, Any] = {}
        try:
            df.groupBy("dept").agg(
                hdp_mean("salary", eps="eps", lower=0, upper=250_000).alias("s")).collect()
        except Exception as e:  # reported to the test
            out["error"] = f"{type(e).__name__}: {e}"
        release = hs.agg(df, hdp_mean("salary", eps="eps", lower=0, upper=250_000),
                         unsafe_seed=1).collect()
        out["release_n"] = release[0]["salary_mean_n"]
        print(json.dumps(out))
        spark.stop()
        return
    if mode == "connect":
        builder = SparkSession.builder.remote("local[2]")
    else:
        builder = SparkSession.builder.master(mode)
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.sql.shuffle.partitions", "3")
    spark = hs.configure(builder).getOrCreate()
    try:
        print(json.dumps(run(spark)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
