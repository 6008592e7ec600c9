"""The user-level mean Column checks that run on any session (classic in the test process,
Spark Connect in a subprocess: a Connect server cannot share the test run's JVM). Prints
JSON when run as a script: on a local Spark Connect server, or on the master given as its
argument (``local-cluster[2,1,1024]``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

ARGS: dict[str, Any] = {"user": "user", "eps": "eps", "lower": 0.0, "upper": 10.0}


def table(users: int = 900, seed: int = 3) -> pd.DataFrame:
    """Users with 1-12 rows each, one ε per user (three levels), one country per user;
    values partly outside [lower, upper], some null and NaN."""
    rng = np.random.default_rng(seed)
    k = rng.integers(1, 13, users)
    eps = rng.choice([0.5, 1.0, 2.0], users)
    country = rng.choice(["fr", "de", "it"], users, p=[0.4, 0.35, 0.25])
    mean = rng.uniform(1.0, 9.0, users)
    user = np.repeat(np.arange(users), k)
    x = rng.normal(mean[user], 2.0)
    x[rng.random(x.size) < 0.03] = np.nan
    frame = pd.DataFrame({"user": [f"u{u}" for u in user], "x": x, "eps": eps[user],
                          "country": country[user]})
    frame.loc[rng.random(len(frame)) < 0.02, "x"] = None
    return frame


def plain(v: Any) -> Any:
    """A struct's value as plain data (Rows to dicts; NaN as a string: JSON compares)."""
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def query_key(frame: Any, col: Any, by: tuple[str, ...] = ()) -> tuple[Any, dict[Any, Any]]:
    """(the Column's key for the query ``frame.groupBy(*by).agg(col)``, group text of each
    group), read from the native aggregate of the same query (same arguments: the same
    fingerprint)."""
    from hdp_spark.spark.columns_users import native_users

    cells = frame.groupBy(*by).agg(native_users(col.spec, col.groups).alias("c"))
    rows = cells.select(*by, "c.group", "c.query").collect()
    assert len({r["query"] for r in rows}) == 1
    texts = {tuple(r[b] for b in by): r["group"] for r in rows}
    return col.key.for_query(rows[0]["query"]), texts


def reference(df: Any, col: Any, key: Any) -> dict[str, Any]:
    """The release API's row for ``df`` under ``key``, named as the Column's fields."""
    import hdp_spark.spark as hs
    from hdp_spark.spark.users_finalize import user_fields

    row = hs.user_mean(df, col, unsafe_seed=key).collect()[0]
    name = col.spec.name
    out: dict[str, Any] = plain({f: row[name + o.suffix] for f, o in user_fields(col.spec)})
    return out


def run(spark: Any) -> dict[str, Any]:
    """The global, public-keys and key-list Columns beside the release API for the same keys."""
    import hdp_spark.spark as hs
    from hdp_spark.spark.records_finalize import group_key

    df = spark.createDataFrame(table()).repartition(4)
    col = hs.hdp_user_mean("x", **ARGS).unsafe_seed(7)  # type: ignore[operator]
    got = plain(df.agg(col.alias("um")).collect()[0]["um"])
    qkey, text = query_key(df, col)
    assert text == {(): "[]"}  # a global aggregate's group: no grouping value
    ref = reference(df, col, group_key(qkey, col.spec.name, text[()]))
    grouped: dict[str, Any] = {}
    for label, keys in (("public", "public"), ("list", ["fr", "it", "es"])):
        gcol = hs.hdp_user_mean("x", **ARGS, keys=keys).unsafe_seed(8)  # type: ignore[operator]
        rows = df.groupBy("country").agg(gcol).collect()
        gkey, texts = query_key(df, gcol, ("country",))
        per = {}
        for r in rows:
            c = r["country"]
            k = group_key(gkey, gcol.spec.name, texts[(c,)])
            per[c] = [plain(r[gcol.spec.name]), reference(df.filter(df.country == c), gcol, k)]
        grouped[label] = per
    again = plain(df.agg(col.alias("um")).collect()[0]["um"])
    other = plain(df.filter("x IS NULL OR x < 1e9").agg(col.alias("um")).collect()[0]["um"])
    return {"session": type(spark).__module__, "global": [got, ref], "grouped": grouped,
            "again": again, "other_filter": other}


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
