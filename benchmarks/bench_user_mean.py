"""Speed of the user-level mean against the native per-user aggregation, measured in one run.

Cases, on the same cached DataFrame of --users users × --rows-per-user rows (2 cores,
local[2]; every user has the same k, four ε levels assigned by user id):

  native:  df.groupBy(user).agg(sum(clamped x) / count) then avg over the users, collected:
           the plain (non-private) mean of the users' means, the answer without privacy.
  floor:   the per-user pass the release itself needs (count, sum of the clamped value,
           min ε and max ε per user) with one global aggregate over it, collected: what
           Spark spends on the same shuffle before any DP logic runs.
  hdp:     hdp_spark.spark.user_mean(df, hdp_user_mean(...)), which returns with the
           release computed (one shuffle to a persisted per-user table, then about six small
           jobs over that table: census, boundary ranks, first stage, final stage).
  hdp with collect: the same plus ``.collect()`` of its one-row output.

Ratios are ratios of medians of interleaved runs (hdp / native, with floor / native printed
beside each). No target is asserted: a loaded machine moves them. The release is eager: its
persisted per-user table is dropped before it returns, so every run pays the shuffle again.

Run: .venv/bin/python benchmarks/bench_user_mean.py --users 1000000 --rows-per-user 10
Smoke (CI, ``benchmarks/run.py --smoke``): 2,000 users × 5 rows, one repeat, no warm-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_report_args,
    driver_peak_rss_mib,
    fmt,
    interleaved_runs,
    jvm_peak_rss_mib,
    load_average,
    md_table,
    median,
    quartiles,
    spark_session,
    use_repo,
    write_report,
)

use_repo()

LOWER, UPPER = 0.0, 100.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--rows-per-user", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    add_report_args(parser)
    args = parser.parse_args()
    warmup = 2
    if args.smoke:
        args.users, args.rows_per_user, args.repeats, warmup = (
            min(args.users, 2_000), min(args.rows_per_user, 5), 1, 0)

    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    load_start = load_average()
    spark = spark_session()
    rows = args.users * args.rows_per_user
    df = spark.range(rows).select(
        (F.col("id") % args.users).alias("user"),
        (F.rand(7) * 120 - 10).alias("x"),  # values partly outside [0, 100]
        (F.lit(0.1) * F.pow(F.lit(2.0), F.col("id") % args.users % 4)).alias("eps"),
    ).cache()
    df.count()
    clamped = F.least(F.greatest(F.col("x"), F.lit(LOWER)), F.lit(UPPER))
    spec = hs.hdp_user_mean("x", user="user", eps="eps", lower=LOWER, upper=UPPER)

    def native() -> object:
        per_user = df.groupBy("user").agg((F.sum(clamped) / F.count(F.lit(1))).alias("m"))
        return per_user.agg(F.avg("m")).collect()

    def floor() -> object:
        per_user = df.groupBy("user").agg(
            F.count(F.lit(1)).alias("k"), F.sum(clamped).alias("s"),
            F.min("eps").alias("emin"), F.max("eps").alias("emax"))
        return per_user.agg(F.sum("k"), F.sum("s"), F.min("emin"), F.max("emax")).collect()

    cases = {
        "native": native,
        "floor": floor,
        "hdp": lambda: hs.user_mean(df, spec),
        "hdp_collect": lambda: hs.user_mean(df, spec).collect(),
    }
    runs, values = interleaved_runs(cases, repeats=args.repeats, warmup=warmup)
    t = {name: median(ts) for name, ts in runs.items()}
    results: dict[str, float] = {f"{name}_s": v for name, v in t.items()}
    results["hdp_ratio"] = t["hdp"] / t["native"]
    results["hdp_collect_ratio"] = t["hdp_collect"] / t["native"]
    results["floor_ratio"] = t["floor"] / t["native"]
    results["hdp_over_floor"] = t["hdp"] / t["floor"]
    q = quartiles([h / n for h, n in zip(runs["hdp"], runs["native"], strict=True)])
    results["paired_p25"], results["paired_p50"], results["paired_p75"] = q
    last = values["hdp_collect"][-1]
    results["released_users"] = float(last[0]["x_user_mean_users"])  # type: ignore[index]
    results["driver_peak_rss_mib"] = driver_peak_rss_mib()
    jvm = jvm_peak_rss_mib(spark)
    if jvm is not None:
        results["jvm_peak_rss_mib"] = jvm
    print(json.dumps({k: round(v, 3) for k, v in results.items()}, indent=2))
    meta = {
        "users": args.users,
        "rows_per_user": args.rows_per_user,
        "rows": rows,
        "repeats": args.repeats,
        "load_start": load_start,
        "load_end": load_average(),
    }
    write_report(args.json, name="user-mean", figures=results, markdown=render(results, meta),
                 meta=meta)
    df.unpersist()
    spark.stop()


def render(r: dict[str, float], meta: dict[str, object]) -> str:
    table = md_table(
        ["users × rows", "native s", "floor s", "hdp s", "hdp / native", "floor / native",
         "paired ratios p25–p75", "with collect"],
        [[f"{meta['users']:,} × {meta['rows_per_user']}", fmt(r["native_s"]), fmt(r["floor_s"]),
          fmt(r["hdp_s"]), fmt(r["hdp_ratio"]), fmt(r["floor_ratio"]),
          f"{r['paired_p25']:.2f}–{r['paired_p75']:.2f}", fmt(r["hdp_collect_ratio"])]],
    )
    jvm = f", JVM {fmt(r['jvm_peak_rss_mib'])} MiB" if "jvm_peak_rss_mib" in r else ""
    return (
        f"{meta['rows']:,} cached rows, medians of {meta['repeats']} interleaved runs. native = "
        "per-user `groupBy(user).agg(sum/count)` then `avg`; floor = the per-user pass the "
        "release needs (count, sum, min ε, max ε) plus one global aggregate.\n\n"
        f"{table}\n\nDriver peak RSS {fmt(r['driver_peak_rss_mib'])} MiB{jvm}. Load average "
        f"at start {meta['load_start']}, at end {meta['load_end']}."
    )


if __name__ == "__main__":
    main()
