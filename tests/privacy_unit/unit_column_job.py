"""Run the privacy-unit Columns and SQL on Spark Connect beside the release API for the
query's key and return both as JSON (``run``, on the run's shared Connect server started
with the extension: test_unit_columns.py; ``main`` starts a local server of its own)."""

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
        text = out.getvalue()
        # the fingerprint: the one 64-hex literal; the query bounding key is held by the
        # bounding operator (planned by the server's injected strategy), no literal
        found = set(re.findall(r"\b[0-9a-f]{64}\b", text.split("== Physical Plan ==")[1]))
        assert len(found) == 1, found
        fingerprint = found.pop()
        assert query_bounding_key(bounding_key(col.key), fingerprint) not in text
        assert "HdpUnitBound" in text
        assert "max_groups=2, max_rows=3" in text
        physical = text.split("== Physical Plan ==")[1]
        assert physical.count("Exchange hashpartitioning(user_id") == 1, physical
        assert physical.count("Sort [user_id") == 1, physical
        return col.key.for_query(fingerprint)

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
    hs.register_sql(spark, unsafe_seed=6)
    df.createOrReplaceTempView("hdp_unit_connect_events")
    sq = spark.sql("SELECT country, hdp_mean(amount, eps, 0, 500, 'public', 'unit', "
                   "'user_id', 2, 3) AS out FROM hdp_unit_connect_events GROUP BY country")
    sgot = [r["out"]["estimate"] for r in sq.orderBy("country").collect()]
    skey = _sql_key(sq, 6)
    sref = hs.agg(df, hs.hdp_mean("amount", eps="eps", lower=0, upper=500), by="country",
                  keys=KEYS, **UNIT, unsafe_seed=skey).orderBy("country").collect()
    return {"session": type(spark).__module__, "mean": mean_pairs,
            "sql": [sgot, [r["amount_mean"] for r in sref]],
            "hist": [[b["frequency"] for b in hgot["bins"]],
                     [b["frequency"] for b in href[hname]],
                     hgot["weight"], href[f"{hname}_weight"]]}


def _sql_key(q: Any, seed: int) -> Any:
    """The registration's key for SQL query ``q``: derived with the plan's one 64-hex
    literal besides the registration's bounding key; the query bounding key is none."""
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        q.explain(True)
    text = out.getvalue()
    physical = text.split("== Physical Plan ==")[1]
    key = ReleaseKey.resolve(seed)
    found = set(re.findall(r"\b[0-9a-f]{64}\b", physical)) - {bounding_key(key)}
    assert len(found) == 1, found
    fingerprint = found.pop()
    assert query_bounding_key(bounding_key(key), fingerprint) not in text
    assert physical.count("HdpUnitBound") == 1, physical
    assert physical.count("Exchange hashpartitioning(user_id") == 1, physical
    return key.for_query(fingerprint)


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
