"""The adversarial catalogue of the query fingerprint: every construct that could change the
rows a Column or SQL aggregator aggregates between two evaluations of one query.

Each is either refused at analysis (the message names the construct) or pinned by the
fingerprint (a change gives fresh noise; no change repeats the numbers). Shared by the
classic test (the session fixture) and the Spark Connect test (a subprocess: a local
Connect server cannot share a JVM with the classic session):
``python guard_cases.py connect`` prints the results as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

REFUSED: dict[str, str] = {
    # time and session functions, in a projection, a filter and a CASE WHEN
    "current_timestamp_case_when": "`current_timestamp()` below a DP aggregate is refused",
    "current_date_filter": "`current_date()` below a DP aggregate is refused",
    "current_user_projection": "`current_user()` below a DP aggregate is refused",
    "current_timestamp_in_argument": "`current_timestamp()` below a DP aggregate",
    # nondeterministic expressions, with and without a seed
    "rand_no_seed": "the nondeterministic expression `rand(",
    "rand_seed": "the nondeterministic expression `rand(7",
    "rand_in_argument": "the nondeterministic expression `rand(",
    "uuid": "the nondeterministic expression `uuid(",
    "monotonically_increasing_id": "the nondeterministic expression "
                                   "`monotonically_increasing_id()`",
    "spark_partition_id": "the nondeterministic expression `SPARK_PARTITION_ID()`",
    "nondeterministic_udf": "the nondeterministic expression `<lambda>(x)`",
    # operators whose rows depend on partitioning or arrival order
    "limit": "`LIMIT`/`OFFSET`/`tail`",
    "sample_seeded": "`TABLESAMPLE`/`sample(...)`",
    "sql_limit": "`LIMIT`/`OFFSET`/`tail`",
    "sql_tablesample": "`TABLESAMPLE`/`sample(...)`",
    "drop_duplicates_subset": "`dropDuplicates` on some columns",
    "row_number": "the window function `row_number`",
    "map_in_pandas": "the operator `MapInPandas`",
    "first": "the aggregate `first`",
    "avg_of_doubles": "over floating-point values below a DP aggregate is refused",
}
"""Case -> what its error says."""

ALLOWED = ("deterministic_udf", "drop_duplicates_all", "rank", "avg_of_decimals",
           "parquet", "local_checkpoint_of_rand", "literal_time", "sql_view")
"""Cases that run: the same numbers on every evaluation."""


def table() -> pd.DataFrame:
    rng = np.random.default_rng(47)
    n = 300
    return pd.DataFrame({"id": np.arange(n), "x": rng.uniform(0, 100, n),
                         "eps": rng.choice([0.5, 1.0, 2.0], n),
                         "g": rng.choice(["a", "b", "c"], n)})


def _cases(spark: Any, df: Any, path: str) -> dict[str, Callable[[], Any]]:
    import datetime

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    def mean(x: Any = "x") -> Any:
        return hs.hdp_mean(x, eps="eps", lower=0, upper=100)

    def agg(frame: Any) -> Any:
        return frame.agg(mean())

    def keep(pdfs: Any) -> Any:
        yield from pdfs

    udf = F.udf(lambda v: v / 2.0, "double")
    nondet = F.udf(lambda v: v / 2.0, "double").asNondeterministic()
    ts = F.unix_micros(F.current_timestamp())
    return {
        "current_timestamp_case_when": lambda: agg(df.withColumn(
            "x", F.when((F.col("id") == 17) & (ts % 2000 < 1000), 5.0).otherwise(F.col("x")))),
        "current_date_filter": lambda: agg(df.filter(F.current_date() > F.lit("2000-01-01"))),
        "current_user_projection": lambda: agg(df.withColumn(
            "x", F.when(F.current_user() == "nobody", 0.0).otherwise(F.col("x")))),
        "current_timestamp_in_argument": lambda: df.agg(mean(
            F.when(ts % 2 == 0, F.col("x")).otherwise(F.lit(0.0)))),
        "rand_no_seed": lambda: agg(df.withColumn("x", F.rand() * 100)),
        "rand_seed": lambda: agg(df.withColumn("x", F.rand(7) * 100)),
        "rand_in_argument": lambda: df.agg(mean(F.col("x") * F.rand())),
        "uuid": lambda: agg(df.filter(F.expr("uuid() < '8'"))),
        "monotonically_increasing_id": lambda: agg(df.withColumn(
            "x", F.monotonically_increasing_id().cast("double"))),
        "spark_partition_id": lambda: agg(df.filter(F.spark_partition_id() == 0)),
        "nondeterministic_udf": lambda: agg(df.withColumn("x", nondet("x"))),
        "limit": lambda: agg(df.limit(150)),
        "sample_seeded": lambda: agg(df.sample(0.5, seed=7)),
        "sql_limit": lambda: spark.sql(
            "SELECT hdp_mean(x, eps, 0, 100) AS m FROM (SELECT * FROM guard_t LIMIT 150)"),
        "sql_tablesample": lambda: spark.sql(
            "SELECT hdp_mean(x, eps, 0, 100) AS m FROM guard_t "
            "TABLESAMPLE (50 PERCENT) REPEATABLE (7)"),
        "drop_duplicates_subset": lambda: agg(df.dropDuplicates(["g"])),
        "row_number": lambda: agg(df.withColumn(
            "r", F.row_number().over(Window.partitionBy("g").orderBy("eps"))).filter("r < 50")),
        "map_in_pandas": lambda: agg(df.mapInPandas(keep, df.schema)),
        "first": lambda: agg(df.groupBy("id").agg(F.first("x").alias("x"),
                                                  F.min("eps").alias("eps"))),
        "avg_of_doubles": lambda: agg(df.groupBy("id").agg(F.avg("x").alias("x"),
                                                           F.min("eps").alias("eps"))),
        # allowed
        "deterministic_udf": lambda: agg(df.withColumn("x", udf("x"))),
        "drop_duplicates_all": lambda: agg(df.dropDuplicates()),
        "rank": lambda: agg(df.withColumn(
            "r", F.rank().over(Window.partitionBy("g").orderBy("eps"))).filter("r < 50")),
        "avg_of_decimals": lambda: agg(df.groupBy("id").agg(
            F.avg(F.col("x").cast("decimal(20,6)")).cast("double").alias("x"),
            F.min("eps").alias("eps"))),
        "parquet": lambda: agg(spark.read.parquet(path)),
        "local_checkpoint_of_rand": lambda: agg(
            df.withColumn("x", F.rand(3) * 100).localCheckpoint()),
        "literal_time": lambda: agg(df.filter(
            F.lit(datetime.datetime(2026, 1, 1)) > F.lit("2000-01-01"))),
        "sql_view": lambda: spark.sql("SELECT hdp_mean(x, eps, 0, 100) AS m FROM guard_t "
                                      "WHERE g != 'c'"),
    }


def _estimate(frame: Any) -> float:
    row = frame.collect()[0]
    return float(row[0]["estimate"])


def _fingerprint(frame: Any) -> str:
    """The fingerprint a global Column over ``frame`` gets (its native aggregate's)."""
    import hdp_spark.spark as hs
    from hdp_spark.spark.columns import cells_of

    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100)
    return str(frame.agg(cells_of(col.spec, col.groups, col.inputs).alias("c"))
               .collect()[0]["c"]["query"])


def run(spark: Any) -> dict[str, Any]:
    """Every case's outcome, and the pinning checks, as JSON-ready values."""
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    hs.register_sql(spark)
    pdf = table()
    folder = tempfile.mkdtemp(prefix="hdp_guard_")
    path = os.path.join(folder, "t.parquet")
    pdf.to_parquet(path)
    df = spark.createDataFrame(pdf)
    df.createOrReplaceTempView("guard_t")
    out: dict[str, Any] = {"session": type(spark).__module__}
    for name, make in _cases(spark, df, path).items():
        try:
            query = make()
            out[name] = {"values": [_estimate(query), _estimate(query)]}
        except Exception as err:  # the refusal, as the user sees it
            out[name] = {"refused": str(err).splitlines()[0]}
    # the equality oracle of the issue, from SQL alone: twelve runs
    oracle = []
    for _ in range(12):
        try:
            oracle.append(_estimate(spark.sql(
                "SELECT hdp_mean(CASE WHEN id = 17 AND unix_micros(current_timestamp()) % 2000 "
                "< 1000 THEN 5.0 ELSE x END, eps, 0, 100) AS m FROM guard_t")))
        except Exception as err:
            oracle.append(str(err).splitlines()[0])
    out["oracle"] = oracle
    # the Connect re-run loop: a grouped query collected twice
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, keys="public")
    try:
        timed = df.withColumn("t", F.current_timestamp()).groupBy("g").agg(col.alias("m"))
        out["timed_rerun"] = {"values": [sorted(r["m"]["estimate"] for r in timed.collect())
                                         for _ in range(2)]}
    except Exception as err:
        out["timed_rerun"] = {"refused": str(err).splitlines()[0]}
    grouped = df.groupBy("g").agg(col.alias("m"))
    out["grouped_rerun"] = [sorted(r["m"]["estimate"] for r in grouped.collect())
                            for _ in range(2)]
    # pinning: a rewritten file, a replaced view, a rewritten joined table
    before = spark.read.parquet(path)
    fp_before = [_fingerprint(before), _fingerprint(before)]
    time.sleep(1.1)  # a modification time the file system can tell apart
    pdf.to_parquet(path)  # the same rows, written again
    out["rewritten_file"] = [*fp_before, _fingerprint(spark.read.parquet(path))]
    view = [_fingerprint(spark.sql("SELECT * FROM guard_t"))]
    spark.createDataFrame(pdf.assign(x=pdf["x"].where(pdf["id"] != 17, 5.0))) \
        .createOrReplaceTempView("guard_t")
    view.append(_fingerprint(spark.sql("SELECT * FROM guard_t")))
    out["replaced_view"] = view
    lookup = os.path.join(folder, "lookup.parquet")
    pd.DataFrame({"g": ["a", "b", "c"], "w": [1.0, 1.0, 1.0]}).to_parquet(lookup)
    joined = [_fingerprint(df.join(spark.read.parquet(lookup), "g"))]
    time.sleep(1.1)
    pd.DataFrame({"g": ["a", "b"], "w": [1.0, 1.0]}).to_parquet(lookup)
    joined.append(_fingerprint(df.join(spark.read.parquet(lookup), "g")))
    out["rewritten_join"] = joined
    return out


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    builder = (local_remote() if sys.argv[1] == "connect"
               else SparkSession.builder.master("local[2]"))
    session = hs.configure(builder.config("spark.sql.shuffle.partitions", "2")).getOrCreate()
    print(json.dumps(run(session)))
    session.stop()
