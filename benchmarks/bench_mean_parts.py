"""Where the Spark mean's time goes, against native Spark, measured in one run.

On the same cached DataFrame as ``bench_mean.py`` (x, key, ε with --levels distinct
values), interleaved, each case as a ratio to its native baseline:

  global:  native df.agg(avg(clamped x)).collect()
           read_eps   df.agg(count, sum(encode x), max(ε)).collect()  (no grouping)
           query      df.groupBy(ε).agg(count, sum(encode x)).toArrow()  (the release's query)
           release    hdp_spark.spark.release(df, spec)  (query + driver finalize)
           agg        hdp_spark.spark.agg(df, spec)  (+ the output frame)
           collect    hdp_spark.spark.agg(df, spec).collect()
  grouped: the same over 1,000 public keys; native df.groupBy(key).agg(avg(...)).collect(),
           query groupBy(key, ε).

The difference between consecutive cases is what each step costs. Reported, never
asserted.

Run: .venv/bin/python benchmarks/bench_mean_parts.py --rows 10000000 --levels 8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_report_args,
    fmt,
    interleaved,
    load_average,
    md_table,
    spark_session,
    use_repo,
    write_report,
)

use_repo()

STEPS = ("native", "read_eps", "query", "release", "agg", "collect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--levels", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    add_report_args(parser)
    args = parser.parse_args()
    warmup = 2
    if args.smoke:
        args.rows, args.repeats, warmup = min(args.rows, 20_000), 1, 0

    from pyspark.sql import functions as F

    import hdp_spark.aggregators as hspec  # specs (hs.hdp_mean is a Column)
    import hdp_spark.spark as hs
    from hdp_spark.spark.expressions import encode_expr

    load_start = load_average()
    spark = spark_session()
    lower, upper = 0.0, 100.0
    df = (
        spark.range(args.rows)
        .select(
            (F.rand(7) * 120 - 10).alias("x"),
            (F.col("id") % 1000).alias("key"),
            (F.lit(0.05) * F.pow(F.lit(1.1), F.col("id") % args.levels)).alias("eps"),
        )
        .cache()
    )
    df.count()
    spec = hspec.hdp_mean("x", eps="eps", lower=lower, upper=upper)
    clamped = F.least(F.greatest(F.col("x"), F.lit(lower)), F.lit(upper))

    def enc() -> object:
        return encode_expr("x", lower, upper, spec.fill_value)

    keys = list(range(1000))
    cases = {
        "global_native": lambda: df.agg(F.avg(clamped)).collect(),
        "global_read_eps": lambda: df.agg(F.count(F.lit(1)), F.sum(enc()), F.max("eps")).collect(),
        "global_query": lambda: df.groupBy("eps").agg(F.count(F.lit(1)), F.sum(enc())).toArrow(),
        "global_release": lambda: hs.release(df, spec),
        "global_agg": lambda: hs.agg(df, spec),
        "global_collect": lambda: hs.agg(df, spec).collect(),
        "grouped_native": lambda: df.groupBy("key").agg(F.avg(clamped)).collect(),
        "grouped_read_eps": lambda: df.groupBy("key")
        .agg(F.count(F.lit(1)), F.sum(enc()), F.max("eps"))
        .collect(),
        "grouped_query": lambda: df.groupBy("key", "eps")
        .agg(F.count(F.lit(1)), F.sum(enc()))
        .toArrow(),
        "grouped_release": lambda: hs.release(df, spec, by="key", keys=keys),
        "grouped_agg": lambda: hs.agg(df, spec, by="key", keys=keys),
        "grouped_collect": lambda: hs.agg(df, spec, by="key", keys=keys).collect(),
    }
    t = interleaved(cases, repeats=args.repeats, warmup=warmup)
    figures: dict[str, float] = {}
    for shape in ("global", "grouped"):
        base = t[f"{shape}_native"]
        for step in STEPS:
            figures[f"{shape}_{step}_s"] = t[f"{shape}_{step}"]
            figures[f"{shape}_{step}_ratio"] = t[f"{shape}_{step}"] / base
    print(json.dumps({k: round(v, 3) for k, v in figures.items()}, indent=2))
    meta = {
        "rows": args.rows,
        "levels": args.levels,
        "repeats": args.repeats,
        "load_start": load_start,
        "load_end": load_average(),
    }
    write_report(args.json, name="mean-parts", figures=figures,
                 markdown=render(figures, meta), meta=meta)
    spark.stop()


def render(r: dict[str, float], meta: dict[str, object]) -> str:
    rows = [
        [step]
        + [x for shape in ("global", "grouped")
           for x in (fmt(r[f"{shape}_{step}_s"]), fmt(r[f"{shape}_{step}_ratio"]))]
        for step in STEPS
    ]
    table = md_table(
        ["step", "global s", "global / native", "grouped s", "grouped / native"], rows
    )
    return (
        f"{meta['rows']:,} cached rows, {meta['levels']} ε levels, medians of "
        f"{meta['repeats']} interleaved runs (grouped: 1,000 public keys).\n\n{table}\n\n"
        f"Load average at start {meta['load_start']}, at end {meta['load_end']}."
    )


if __name__ == "__main__":
    main()
