"""Run one release through Spark Connect and print it as JSON (used by test_connect.py).

A separate process: a local Spark Connect server cannot share a JVM with the classic
session of the test run.
"""

from __future__ import annotations

import json
import sys

import pandas as pd


def main() -> None:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs
    from hdp_spark import EpsGrid

    pdf = pd.read_parquet(sys.argv[1])
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    try:
        df = spark.createDataFrame(pdf).repartition(3)
        out = hs.agg(
            df,
            hs.hdp_mean("x", eps="eps", lower=0, upper=100),
            hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", alias="a",
                        eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10)),
            by="g",
            keys=["a", "b", "z"],
            unsafe_seed=11,
        )
        first = out.toPandas()
        second = out.toPandas()  # re-evaluation must give identical numbers
        assert first.drop(columns=["x_mean_eps_levels", "a_eps_levels"]).equals(
            second.drop(columns=["x_mean_eps_levels", "a_eps_levels"])
        )
        print(json.dumps({"session": type(spark).__module__,
                          "rows": first.drop(columns=["x_mean_eps_levels", "a_eps_levels"])
                          .to_dict(orient="records")}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
