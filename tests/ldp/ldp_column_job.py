"""The local-DP Column checks that run on any session (classic in the test process, Spark
Connect or local-cluster in a subprocess). Prints JSON when run as a script: on a local
Spark Connect server, or on the master given as its argument (``local-cluster[2,1,1024]``).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from test_ldp_engines import _reports, _same

sys.path.pop(0)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

MARKS = {"lap": "laplace", "rr": "rr", "du40": "duchi", "j": "jl", "b": "jl"}
KEYS = ["a", "b", "c"]


def marked(frame: Any) -> Any:
    """``frame`` with the report columns marked as ``ldp_simulate`` marks them."""
    from pyspark.sql import functions as F

    return frame.select(*[
        F.col(c).alias(c, metadata={"hdp_ldp_report": MARKS[c]}) if c in MARKS else F.col(c)
        for c in frame.columns])


def columns(oracle: Any, keys: Any = None) -> list[Any]:
    """The four local-DP Columns (marked reports: no ``already_randomized``)."""
    import hdp_spark.spark as hs

    return [
        hs.ldp_mean("lap", eps="eps", mechanism="laplace", lower=5, upper=15, keys=keys),
        hs.ldp_mean("rr", eps="eps", mechanism="rr", weights="uniform", keys=keys),
        hs.ldp_mean_vector("du40", eps="eps", d=40, radius=2.0, weights="inverse_variance",
                           keys=keys),
        hs.ldp_distribution("j", "b", eps="eps", oracle=oracle, keys=keys),
    ]


def differences(struct: Any, release: dict[str, Any], spec: Any) -> list[str]:
    """The fields where a Column's struct and the release API's row differ."""
    from hdp_spark.core.ldp.release import output_fields

    got = struct.asDict(recursive=True)
    return [spec.name + suffix for suffix, _ in output_fields(spec)
            if not _same(got[suffix.lstrip("_") or "estimate"], release[spec.name + suffix])]


def run(spark: Any) -> dict[str, Any]:
    """Every Column beside the release API: global, keys="public", a key list, the
    descriptor's Column (``hs.as_column``), and a re-evaluation."""
    import hdp_spark.spark as hs
    from hdp_spark.front import spec_of

    warnings.simplefilter("ignore")
    pdf, oracle = _reports()
    df = marked(spark.createDataFrame(pdf).repartition(3))
    cols = columns(oracle)
    specs = [spec_of(c) for c in cols]
    got = df.agg(*cols).collect()[0]
    want = hs.ldp_release(df, *cols).rows()[0]
    out: dict[str, Any] = {"session": type(spark).__module__, "diff": [], "fields": 0}
    for spec in specs:
        out["diff"] += differences(got[spec.name], want, spec)
        out["fields"] += len(got[spec.name])
    again = df.agg(*columns(oracle)).collect()[0]  # other Columns, the same numbers
    out["again"] = all(again[s.name] == got[s.name] for s in specs)
    public = df.groupBy("g").agg(*columns(oracle, "public")).collect()
    described = df.groupBy("g").agg(*[hs.as_column(s, keys="public") for s in specs]).collect()
    want_g = {r["g"]: r for r in hs.ldp_release(df, *specs, by="g", keys=KEYS).rows()}
    out["public"] = sorted(r["g"] for r in public)
    for rows in (public, described):
        for r in rows:
            for spec in specs:
                out["diff"] += [f"{r['g']}:{d}" for d in differences(r[spec.name],
                                                                     want_g[r["g"]], spec)]
    listed = df.groupBy("g").agg(*columns(oracle, ["a", "zz"])).collect()
    out["listed"] = [r["g"] for r in listed]
    for r in listed:
        for spec in specs:
            out["diff"] += [f"listed:{d}" for d in differences(r[spec.name], want_g["a"], spec)]
    out["differs_by_group"] = public[0][specs[0].name]["estimate"] != public[1][
        specs[0].name]["estimate"]
    return out


def main() -> None:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
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
