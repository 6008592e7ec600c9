"""Run the privacy-unit Columns on Spark Connect beside the release API for the query's
key and print what differs as JSON (used by test_unit_columns.py: a local Connect server
cannot share a JVM with the classic session of the test run)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote


def run(spark: Any) -> dict[str, Any]:
    """(Column row, release API row) of a grouped mean and a global histogram."""
    import hdp_spark.spark as hs
    from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key

    sys.path.insert(0, str(Path(__file__).parents[2]))
    from tests.privacy_unit.test_unit_columns import CATS, KEYS, UNIT, _events

    df = spark.createDataFrame(_events(seed=3, n=1500)).repartition(3)

    def query_key(q: Any, col: Any) -> Any:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            q.explain(True)
        found = set(re.findall(r"\b[0-9a-f]{64}\b", out.getvalue()))
        fps = [fp for fp in found if query_bounding_key(bounding_key(col.key), fp) in found]
        assert len(fps) == 1, found
        return col.key.for_query(fps[0])

    mean = hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys="public",
                       **UNIT).unsafe_seed(4)  # type: ignore[attr-defined,operator]
    q = df.groupBy("country").agg(mean.alias("out"))
    got = [r["out"].asDict() for r in q.orderBy("country").collect()]
    ref = hs.agg(df, mean, by="country", keys=KEYS, **UNIT,
                 unsafe_seed=query_key(q, mean)).orderBy("country").collect()
    name = mean.spec.name
    mean_pairs = [[g["estimate"], r[name], g["weight"], r[f"{name}_weight"]]
                  for g, r in zip(got, ref, strict=True)]
    hist = hs.hdp_histogram("category", eps="eps", categories=CATS,
                            **UNIT).unsafe_seed(5)  # type: ignore[attr-defined,operator]
    hq = df.agg(hist.alias("out"))
    hgot = hq.collect()[0]["out"]
    href = hs.agg(df, hist, **UNIT, unsafe_seed=query_key(hq, hist)).collect()[0]
    hname = hist.spec.name
    return {"session": type(spark).__module__, "mean": mean_pairs,
            "hist": [[b["frequency"] for b in hgot["bins"]],
                     [b["frequency"] for b in href[hname]],
                     hgot["weight"], href[f"{hname}_weight"]]}


def main() -> None:

    import hdp_spark.spark as hs

    builder = local_remote().config(
        "spark.sql.shuffle.partitions", "3")
    spark = hs.configure(builder).getOrCreate()
    try:
        print(json.dumps(run(spark)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
