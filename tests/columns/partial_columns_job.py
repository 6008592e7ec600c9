"""The marginals, MWEM and attribute-histogram Column checks that run on any session
(classic in the test process, Spark Connect or local-cluster in a subprocess). Prints JSON
when run as a script: on a local Spark Connect server, or on the master given as its
argument (``local-cluster[2,1,1024]``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from hh_column_job import query_key, records, table

sys.path.pop(0)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

COLS = ["age_band", "sex", "region"]
DOMAINS: dict[str, list[Any]] = {
    "age_band": [1, 2, 3, 4, 5],
    "sex": ["f", "m"],
    "region": ["north", "south", "east", "west"],
}
KINDS = ("marginals", "mwem", "attribute_histograms")


def column(kind: str, **kwargs: Any) -> Any:
    """The Column of ``kind`` over COLS (seeded by the caller)."""
    import hdp_spark.spark as hs

    if kind == "marginals":
        return hs.hdp_marginals(COLS, domains=DOMAINS, eps0=1.0, k=2, **kwargs)
    if kind == "mwem":
        # σ ≈ 6 counts over 5 rounds: two independent keys give equal outputs with
        # probability ~1e-6 (at eps0 = 2, 3 rounds, σ ≈ 1.2 made it a few per cent, and the
        # "other noise" checks failed now and then)
        return hs.hdp_mwem(COLS, domains=DOMAINS, eps0=0.5, k=2, rounds=5, **kwargs)
    return hs.attribute_histograms(COLS, domains=DOMAINS, eps0=0.5, other={"sex": "f"},
                                   **kwargs)


def release(kind: str, frame: Any, col: Any, key: Any) -> tuple[list[Any], dict[str, Any]]:
    """The release API's table (through ``hs.agg``, as the Column's list) and report."""
    import hdp_spark.spark as hs

    rows = records(hs.agg(frame, col, unsafe_seed=key).collect()[0][col.spec.name])
    if kind == "marginals":
        report = hs.marginals(frame, col, unsafe_seed=key).report.as_dict()
    elif kind == "mwem":
        report = hs.mwem(frame, col, unsafe_seed=key).report
    else:
        report = hs.attribute_histograms(frame, COLS, domains=DOMAINS, eps0=0.5,
                                         other={"sex": "f"}, unsafe_seed=key).report.as_dict()
    return rows, report


def run_kind(spark: Any, df: Any, kind: str) -> dict[str, Any]:
    """One family's global and grouped Columns beside the release API for the same keys."""
    from hdp_spark.spark.records_families import family_of
    from hdp_spark.spark.records_finalize import group_key

    col = column(kind).unsafe_seed(7)
    family = family_of(col.spec)
    got = df.agg(col).collect()[0][col.spec.name]
    qkey, text = query_key(df, col)
    key = group_key(qkey, col.spec.name, text[()])
    want, report = release(kind, df, col, key)
    grouped = column(kind, keys="public").unsafe_seed(7)
    rows = df.groupBy("country").agg(grouped).orderBy("country").collect()
    gkey, texts = query_key(df, grouped, ("country",))
    per_group = {}
    for r in rows:
        k = group_key(gkey, grouped.spec.name, texts[(r["country"],)])
        ref, ref_report = release(kind, df.filter(df.country == r["country"]), grouped, k)
        mine = r[grouped.spec.name]
        per_group[r["country"]] = [
            [records(mine[family.main]), {f.suffix: mine[f.suffix] for f in family.report}],
            [ref, {f.suffix: ref_report[f.suffix] for f in family.report}]]
    listed = column(kind, keys=["fr", "es"])
    listed_rows = df.groupBy("country").agg(listed).collect()
    again = df.agg(col).collect()[0][col.spec.name]
    other = df.filter("sex IS NULL OR sex != 'x'").agg(col).collect()[0][col.spec.name]
    return {
        "main": family.main,
        "cells": records(got[family.main]),
        "ref_cells": want,
        "report": {f.suffix: got[f.suffix] for f in family.report},
        "ref_report": {f.suffix: report[f.suffix] for f in family.report},
        "groups": per_group,
        "listed": [r["country"] for r in listed_rows],
        "again": records(again[family.main]),
        "other_filter": records(other[family.main]),
    }


def run(spark: Any) -> dict[str, Any]:
    """Every family's checks on one session."""
    df = spark.createDataFrame(table(3000)).repartition(4)
    out: dict[str, Any] = {"session": type(spark).__module__}
    for kind in KINDS:
        out[kind] = run_kind(spark, df, kind)
    return out


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
