"""Run the issue's Column snippet in a separate Spark (Connect or local-cluster) and print
its numbers and the release API's as JSON. Used by test_column_sessions.py: a Connect
server or a cluster cannot share a JVM with the test run's classic session."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

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


def query_key(frame: Any, col: Any, by: tuple[str, ...] = ()) -> Any:
    """The noise key of Column ``col`` in ``frame.groupBy(*by).agg(col)``: its release key
    derived with the query's fingerprint, read from the native cells of the same query (the
    fingerprint covers the input plan, the grouping and the aggregate's arguments, not the
    finalize around it). Tests pass it to the release API as ``unsafe_seed``."""
    from hdp_spark.spark.columns import cells_of

    cells = frame.groupBy(*by).agg(cells_of(col.spec, col.groups, col.inputs).alias("c"))
    fingerprints = {r[0] for r in cells.select("c.query").collect()}
    assert len(fingerprints) == 1, fingerprints  # one query: one fingerprint for all groups
    return col.key.for_query(fingerprints.pop())


def attacks(spark: Any) -> dict[str, bool]:
    """The composition attacks of the Column and SQL paths: does an output repeat exactly
    across two different queries (the `*_repeats` of different queries must be False; the
    same query must repeat; for how rarely independent noise ties, see below)."""
    from hdp_spark.spark import hdp_mean, register_sql

    pdf = table().reset_index().rename(columns={"index": "id"})
    # ε of 0.1 and 0.2: each row's noise grid step g is at most 2**-20 of its sensitivity
    # (exact sampler), so two independent draws tie with probability about g / (2b) <=
    # 2**-21 * 0.2 < 1e-7 per comparison: with 4 comparisons of different queries, a false
    # failure has probability below 4e-7 per run
    pdf["eps"] = np.where(np.arange(len(pdf)) % 2 == 0, 0.1, 0.2)
    base_df = spark.createDataFrame(pdf)
    base_df.createOrReplaceTempView("attack_t")
    register_sql(spark)  # one fresh key for every query below
    q = "SELECT hdp_mean(salary, eps, 0, 200000) AS m FROM attack_t"

    def one(sql: str) -> float:
        return float(spark.sql(sql).collect()[0]["m"]["estimate"])

    base = one(q)
    m = hdp_mean("salary", eps="eps", lower=0, upper=200_000)  # one Column, reused
    col_base = float(base_df.agg(m).collect()[0][0]["estimate"])
    guess = float(pdf.loc[17, "salary"])
    return {
        "sql_missing_id_repeats": one(q + " WHERE id != 99999") == base,
        "sql_present_id_differs": one(q + " WHERE id != 17") != base,
        "sql_same_query_repeats": one(q) == base,
        "column_filter_repeats": float(base_df.filter("id != 99999").agg(m).collect()[0][0][
            "estimate"]) == col_base,
        "column_same_query_repeats": float(base_df.agg(m).collect()[0][0]["estimate"])
        == col_base,
        "case_when_right_guess_repeats": one(
            f"SELECT hdp_mean(CASE WHEN id = 17 THEN {guess!r}D ELSE salary END, "
            "eps, 0, 200000) AS m FROM attack_t") == base,
    }


def run(spark: Any) -> dict[str, Any]:
    import hdp_spark.spark as hs
    from hdp_spark.spark import hdp_histogram, hdp_mean

    df = spark.read.parquet(write_table(spark)).repartition(4)
    total_col = hdp_mean("salary", eps="eps", lower=0, upper=250_000).unsafe_seed(3)
    total = df.agg(total_col)
    mean = hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys="public").unsafe_seed(3)
    hist = hdp_histogram("region", eps="eps", categories=CATS, keys="public").unsafe_seed(3)
    grouped = df.groupBy("dept").agg(mean.alias("salary"), hist).orderBy("dept")
    keys = ["hr", "it", "ops"]
    ref = hs.agg(df, mean, by="dept", keys=keys,
                 unsafe_seed=query_key(df, mean, ("dept",))).orderBy("dept").collect()
    ref_hist = hs.agg(df, hist, by="dept", keys=keys,
                      unsafe_seed=query_key(df, hist, ("dept",))).orderBy("dept").collect()
    ref_total = hs.agg(df, total_col, unsafe_seed=query_key(df, total_col))
    rows = grouped.collect()
    # a public key list (one key without rows): filtered below the aggregate by the rule
    listed = hdp_mean("salary", eps="eps", lower=0, upper=250_000,
                      keys=["it", "hr", "sales"]).unsafe_seed(3)
    key_list = df.groupBy("dept").agg(listed.alias("s")).orderBy("dept").collect()
    ref_list = hs.agg(df, listed, by="dept", keys=["hr", "it"],
                      unsafe_seed=query_key(df, listed, ("dept",))).orderBy("dept").collect()
    hs.register_sql(spark, unsafe_seed=3)
    df.createOrReplaceTempView("employees")
    sql = spark.sql("SELECT dept, hdp_mean(salary, eps, 0, 250000, 'public') AS s "
                    "FROM employees GROUP BY dept ORDER BY dept").collect()
    sql_key = query_key(spark.table("employees"), hdp_mean(
        "salary", eps="eps", lower=0, upper=250_000, keys="public").unsafe_seed(3), ("dept",))
    ref_sql = hs.agg(df, mean, by="dept", keys=keys, unsafe_seed=sql_key).orderBy("dept")
    selected, ref_selected, clean = selection(df)
    return {
        "errors": errors(spark),
        "selected": selected,
        "ref_selected": ref_selected,
        "selected_plan_clean": clean,
        "sql": [r["s"]["estimate"] for r in sql],
        "ref_sql": [r["salary_mean"] for r in ref_sql.collect()],
        "session": type(spark).__module__,
        "total": total.collect()[0][0]["estimate"],
        "ref_total": ref_total.collect()[0]["salary_mean"],
        "mean": [r["salary"]["estimate"] for r in rows],
        "ref_mean": [r["salary_mean"] for r in ref],
        "bins": [[b["frequency"] for b in r["region_histogram"]["bins"]] for r in rows],
        "ref_bins": [[b["frequency"] for b in r["region_histogram"]] for r in ref_hist],
        "key_list": [[r["dept"], r["s"]["estimate"]] for r in key_list],
        "ref_key_list": [[r["dept"], r["salary_mean"]] for r in ref_list],
        "attacks": attacks(spark),
        "expression_n": expression_n(df),
    }


def selection(df: Any) -> tuple[list[Any], list[Any], bool]:
    """Private groups, ``keys=select_keys(...)``: the three departments and one group per
    low salary (one person each, never released): the rows, the release API's rows for the
    same key, and whether the query's plan is filtered by the selection and names no
    candidate key."""
    import contextlib
    import io

    from pyspark.sql import functions as F

    import hdp_spark.spark as hs
    from hdp_spark.spark import hdp_mean

    sel = hs.select_keys(delta=1e-6, c=1.0, share=0.4)
    col = hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys=sel).unsafe_seed(3)
    frame = df.withColumn("g", F.when(F.col("salary") < 900, F.col("salary").cast("string"))
                          .otherwise(F.col("dept")))
    query = frame.groupBy("g").agg(col.alias("s")).orderBy("g")
    rows = [[r["g"], r["s"]["estimate"], r["s"]["weight"]] for r in query.collect()]
    ref = hs.agg(frame, col, by="g", keys=sel, unsafe_seed=query_key(frame, col, ("g",)))
    ref_rows = [[r["g"], r["salary_mean"], r["salary_mean_weight"]]
                for r in ref.orderBy("g").collect()]
    solos = [r["g"] for r in frame.filter("salary < 900").select("g").collect()]
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        query.explain(True)
    text = plan.getvalue()
    filtered = "Filter isnotnull(" in text and "hdp_mean_select(" in text  # above the cells
    return rows, ref_rows, filtered and bool(solos) and not any(k in text for k in solos)


def errors(spark: Any) -> list[list[Any]]:
    """The Column and SQL error cases as (class name, lines of the error, the error): a bad
    ε (global and grouped), a non-numeric value column in SQL."""
    from hdp_spark.spark import hdp_mean

    pdf = table().head(300).copy()
    pdf.loc[[0, 5], "eps"] = [np.nan, -1.0]
    df = spark.createDataFrame(pdf)
    df.createOrReplaceTempView("bad_eps_t")
    out = []
    for run in (
        lambda: df.agg(hdp_mean("salary", eps="eps", lower=0, upper=250_000)).collect(),
        lambda: spark.sql("SELECT dept, hdp_mean(salary, eps, 0, 250000, 'public') "
                          "FROM bad_eps_t GROUP BY dept").collect(),
        lambda: spark.sql("SELECT hdp_mean(dept, eps, 0, 1) FROM bad_eps_t").collect(),
    ):
        try:
            run()
            out.append(["none", 0, ""])
        except Exception as e:  # reported to the test
            # Spark Connect appends the server's "JVM stacktrace:" to every error (its own
            # too; spark.sql.connect.serverStacktrace.enabled=false turns it off): the
            # error itself is what comes before
            text = str(e).split("\n\nJVM stacktrace:")[0]
            out.append([type(e).__name__, len(text.splitlines()), text])
    return out


def expression_n(df: Any) -> int:
    """A Column over expressions for value and ε (as pyspark.sql.functions take them)."""
    from pyspark.sql import functions as F

    from hdp_spark.spark import hdp_mean

    col = hdp_mean(F.col("salary") / 1000, eps=F.coalesce("eps", F.lit(0.0)), lower=0,
                   upper=250)
    return int(df.agg(col).collect()[0][0]["n"])


def write_table(spark: Any) -> str:
    """The table as a parquet file at a fixed path (a file source: the same query on
    classic, Connect and a cluster has the same fingerprint)."""
    import tempfile
    from pathlib import Path

    path = Path(tempfile.gettempdir()) / "hdp_spark_column_job.parquet"
    if not path.exists():
        table().to_parquet(path)
    return str(path)


def run_bare(spark: Any) -> dict[str, Any]:
    """On a Connect server without the extension: the Column's error, and the release
    API's count on the same session."""
    import hdp_spark.spark as hs
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
    return out


def main() -> None:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    mode = sys.argv[1]
    if mode == "connect-bare":  # a Connect server started without the extension
        spark = local_remote().getOrCreate()
        print(json.dumps(run_bare(spark)))
        spark.stop()
        return
    if mode == "connect":
        builder = local_remote()
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
