"""The heavy-hitters Column checks that run on any session (classic in the test process,
Spark Connect in a subprocess: a Connect server cannot share the test run's JVM). Prints
JSON when run as a script: on a local Spark Connect server, or on the master given as its
argument (``local-cluster[2,1,1024]``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

COLS = ["age_band", "sex", "region", "occupation"]
DOMAINS: dict[str, list[Any]] = {
    "age_band": [1, 2, 3, 4, 5],
    "sex": ["f", "m"],
    "region": ["north", "south", "east", "west"],
    "occupation": [f"job{i}" for i in range(70)],  # above the literal-chain limit: a lookup
}


def table(n: int = 8000, seed: int = 5) -> pd.DataFrame:
    """A table with frequent records, nulls and out-of-domain values."""
    rng = np.random.default_rng(seed)
    occupations = [*DOMAINS["occupation"], "astronaut", None]
    weights = np.r_[np.full(5, 30.0), np.ones(67)]
    return pd.DataFrame({
        "age_band": rng.choice([1, 2, 3, 4, 5, 9], n, p=[0.4, 0.3, 0.1, 0.1, 0.05, 0.05]),
        "sex": rng.choice(["f", "m", None], n, p=[0.55, 0.4, 0.05]),
        "region": rng.choice(["north", "south", "east", "west", "moon"], n,
                             p=[0.5, 0.2, 0.1, 0.1, 0.1]),
        "occupation": rng.choice(np.array(occupations, dtype=object), n,
                                 p=weights / weights.sum()),
        "country": rng.choice(["fr", "de", "it"], n, p=[0.5, 0.3, 0.2]),
    })


def records(rows: Any) -> list[list[Any]]:
    """A released records list as plain lists (Rows or dicts)."""
    return [list(r.asDict().values()) if hasattr(r, "asDict") else list(r.values())
            for r in rows]


def query_key(frame: Any, col: Any, by: tuple[str, ...] = ()) -> tuple[Any, dict[Any, Any]]:
    """(the Column's key for the query ``frame.groupBy(*by).agg(col)``, group text of each
    group), read from the native aggregate of the same query (same arguments: the same
    fingerprint)."""
    from hdp_spark.spark.columns_partial import native_records

    cells = frame.groupBy(*by).agg(native_records(col.spec, col.groups).alias("c"))
    rows = cells.select(*by, "c.group", "c.query").collect()
    assert len({r["query"] for r in rows}) == 1
    texts = {tuple(r[b] for b in by): r["group"] for r in rows}
    return col.key.for_query(rows[0]["query"]), texts


def run(spark: Any) -> dict[str, Any]:
    """The global and grouped Columns beside the release API for the same keys."""
    import hdp_spark.spark as hs
    from hdp_spark.spark.records_finalize import REPORT_FIELDS, group_key

    df = spark.createDataFrame(table()).repartition(4)
    col = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=4.0, delta=1e-3).unsafe_seed(7)
    got = df.agg(col.alias("hh")).collect()[0]["hh"]
    qkey, text = query_key(df, col)
    assert text == {(): "[]"}  # a global aggregate's group: no grouping value
    key = group_key(qkey, col.spec.name, text[()])
    want = hs.agg(df, col, unsafe_seed=key).collect()[0]["heavy_hitters"]
    report = hs.heavy_hitters(df, col, unsafe_seed=key).report.as_dict()
    grouped = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=4.0, delta=1e-3,
                                   keys="public").unsafe_seed(7)
    rows = df.groupBy("country").agg(grouped).orderBy("country").collect()
    gkey, texts = query_key(df, grouped, ("country",))
    per_group = {}
    for r in rows:
        k = group_key(gkey, grouped.spec.name, texts[(r["country"],)])
        ref = hs.agg(df.filter(df.country == r["country"]), grouped, unsafe_seed=k)
        per_group[r["country"]] = [records(r["heavy_hitters"]["records"]),
                                   records(ref.collect()[0]["heavy_hitters"])]
    again = df.agg(col.alias("hh")).collect()[0]["hh"]
    other = df.filter("sex IS NULL OR sex != 'x'").agg(col.alias("hh")).collect()[0]["hh"]
    return {
        "session": type(spark).__module__,
        "records": records(got["records"]),
        "ref_records": records(want),
        "report": {f.suffix: got[f.suffix] for f in REPORT_FIELDS},
        "ref_report": {f.suffix: report[f.suffix] for f in REPORT_FIELDS},
        "groups": per_group,
        "again": records(again["records"]),
        "other_filter": records(other["records"]),
    }


def main() -> None:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    if sys.argv[1:]:  # a master, e.g. local-cluster[2,1,1024]
        builder = SparkSession.builder.master(sys.argv[1]).config("spark.ui.enabled", "false")
    else:  # a local Spark Connect server
        builder = local_remote()
    builder = builder.config("spark.sql.shuffle.partitions", "3")
    spark = hs.configure(builder).getOrCreate()
    try:
        print(json.dumps(run(spark)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
