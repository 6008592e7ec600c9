"""Speed of the Spark Column aggregators against native Spark, as ratios in one run.

On one cached DataFrame of --rows rows (x uniform on [-10, 260k], ε from --levels distinct
values, key uniform over --keys integers), every case runs once after a warm-up, then
--repeats rounds each run every case once in turn (interleaved; the median of each case's
wall times of a full ``collect``; the key ratios are also reported round by round, as
quartiles over the rounds of the ratio of two cases timed in the same round, beside the
quartiles of every case's seconds):

  global
    native   df.agg(avg(clamped x))                           (the non-private mean)
    floor1   df.groupBy(ε).agg(count, sum(x))                 (Spark's own per-level pass)
    floor2   df.agg(count, sum(x), min(ε), max(ε))            (the no-group pass)
    column   df.agg(hdp_mean("x", eps="eps", lower=0, upper=250_000))
    release  hs.agg(df, hdp_mean(...))                        (the release API)
  grouped (--keys public keys)
    native   df.groupBy(key).agg(avg(clamped x))
    floor1   df.groupBy(key, ε).agg(count, sum(x))
    column   df.groupBy(key).agg(hdp_mean(..., keys="public"))
    cells    df.groupBy(key).agg(hdp_cells(...))              (the native aggregate alone:
             column - cells is what the finalize on the executors adds)
    select   df.groupBy(key).agg(hdp_mean(..., keys=select_keys(delta=1e-7, c=1.0,
             share=0.4)))                                      (private groups: the
             selection pass, the filter, the finalize of the selected groups)
    release  hs.agg(df, hdp_mean(...), by="key", keys=range(--keys))  (the release API
             over the public keys, timed without and with ``collect``: ``agg`` returns
             when the release is done, its rows in a local relation; ``collect`` then only
             turns them into Python ``Row`` objects, no Spark job; issue 31: <= 1.3x
             floor1)

Each grouped case is timed twice: with ``collect()`` (the rows travel to the driver and
become Python ``Row`` objects) and written to Spark's ``noop`` sink (the query runs to the
end on the executors, nothing is collected). The Column's output is larger than the native
mean's (a struct with the ε levels' list per group), and PySpark's ``collect`` of nested
rows costs ~50 µs per group on the driver at 8 levels: with 100,000 groups that is seconds
the library does not control; the noop figures show what the query itself costs.

With ``--grid RATIO`` ε is continuous instead, exp(U[-4, 2]) (0.018 to 7.4), and every hdp
case rounds it down onto ``EpsGrid(ratio=RATIO, lowest=1e-3, highest=1e3)``; the floors
then group by the same grid's level computed as a Spark expression,
``1e-3 · RATIO^floor(ln(ε/1e-3)/ln RATIO)`` (what Spark needs to group by that grid; issue
31's target for ``RATIO = 1.1`` over 1,000 keys: the Column <= 1.3x that floor).

Targets (issue 31, reported, never asserted): the global column <= 1.35x native with
<= 8 levels, <= floor1 + 0.2 (in units of native) with 64 levels, never more than 0.1 above
the release; grouped, the column <= 1.15x floor1 over 1,000 keys (8 and 64 levels) and
<= 1.3x over 100,000 keys, with what the finalize adds <= 1.5 s there (all on the ``noop``
sink); the release over 100,000 public keys <= 1.3x floor1. Issue 33: select <= 1.2x
column (same run), over 100,000 candidate groups. With 10M rows, 1,000 keys every group is
selected (the finalize's worst case); 100,000 keys hold ~100 rows each, below the threshold
(T ~ 81 in units of ε at δ = 1e-7, c = 1, f = 0.4): few are selected.

``--python-socket tcp`` runs Spark's Python workers over loopback TCP instead of the Unix
socket ``hs.configure`` chooses (to measure what the socket costs each Python UDF task).

Run: .venv/bin/python benchmarks/bench_columns.py --rows 10000000 --levels 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import interleaved_runs, load_average, quartiles, uniform

PAIRED = (("global column / native", "global column", "global native"),
          ("global column / floor groupBy(eps)", "global column", "global floor groupBy(eps)"),
          ("noop: grouped column / floor", "grouped column noop", "grouped floor noop"),
          ("noop: grouped cells / floor", "grouped cells noop", "grouped floor noop"),
          ("grouped release / floor", "grouped release", "grouped floor groupBy(key,eps)"))
"""Ratios also taken round by round (both cases timed in the same round), reported as
[p25, median, p75] over the rounds: less sensitive to a slow spell than a ratio of medians.
Beside them, (global column - global release) / global native of each round."""


def _paired(times: dict[str, list[float]]) -> dict[str, list[float]]:
    rounds = {label: [x / y for x, y in zip(times[a], times[b], strict=True)]
              for label, a, b in PAIRED}
    rounds["global column - release, x native"] = [
        (c - r) / n for c, r, n in zip(times["global column"], times["global release"],
                                       times["global native"], strict=True)]
    return {label: [round(v, 3) for v in quartiles(per)] for label, per in rounds.items()}


def _noop(frame: Any) -> None:
    """Run the query to the end without collecting: Spark's ``noop`` sink."""
    frame.write.format("noop").mode("overwrite").save()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--levels", type=int, default=8)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--grid", type=float, default=None,
                    help="continuous ε on EpsGrid(ratio=GRID) instead of --levels values")
    ap.add_argument("--python-socket", choices=("unix", "tcp"), default=None,
                    help="how Spark talks to its Python workers (default: what "
                         "hs.configure sets, a Unix socket where the platform has one)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite's check)")
    args = ap.parse_args()
    if args.smoke:
        args.rows, args.keys, args.repeats = 20_000, 50, 1
    load_start = load_average()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs
    from hdp_spark.spark.columns import native_cells
    from hdp_spark.spark.extension import PYTHON_SOCKET

    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g"))
    if args.python_socket is not None:
        builder = builder.config(PYTHON_SOCKET[0], str(args.python_socket == "unix").lower())
    spark = hs.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    levels = [round(0.1 * 1.25**i, 6) for i in range(args.levels)]
    lv = F.array(*[F.lit(v) for v in levels])
    # deterministic columns (rand below a Column aggregator is refused: see common.uniform)
    eps = (F.element_at(lv, (uniform(2) * len(levels)).cast("int") + 1) if args.grid is None
           else F.exp(F.lit(-4.0) + F.lit(6.0) * uniform(2)))
    df = (spark.range(args.rows, numPartitions=2)
          .select((uniform(1) * 260_010 - 10).alias("x"), eps.alias("eps"),
                  (uniform(3) * args.keys).cast("int").alias("key"))
          .cache())
    df.count()
    grid = None if args.grid is None else hs.EpsGrid(ratio=args.grid, lowest=1e-3,
                                                       highest=1e3)
    level = (F.col("eps") if args.grid is None else  # the floors' ε level: raw or gridded
             (F.lit(1e-3) * F.pow(F.lit(args.grid), F.floor(
                 F.log(F.col("eps") / F.lit(1e-3)) / F.lit(math.log(args.grid))))).alias("lv"))
    clamped = F.least(F.greatest(F.col("x"), F.lit(0.0)), F.lit(250_000.0))
    mean = hs.hdp_mean("x", eps="eps", lower=0, upper=250_000, eps_grid=grid)
    mean_public = hs.hdp_mean("x", eps="eps", lower=0, upper=250_000, keys="public",
                              eps_grid=grid)
    mean_selected = hs.hdp_mean("x", eps="eps", lower=0, upper=250_000, eps_grid=grid,
                                keys=hs.select_keys(delta=1e-7, c=1.0, share=0.4))
    cells = native_cells("eps", grid, values=(("x", 0, 250_000, 125_000.0),))
    public_keys = list(range(args.keys))
    cases = {
        "global native": lambda: df.agg(F.avg(clamped)).collect(),
        "global floor groupBy(eps)": lambda: df.groupBy(level).agg(F.count("*"),
                                                                     F.sum("x")).collect(),
        "global floor count,sum,min,max": lambda: df.agg(F.count("*"), F.sum("x"),
                                                         F.min("eps"), F.max("eps")).collect(),
        "global column": lambda: df.agg(mean).collect(),
        "global release": lambda: hs.agg(df, mean).collect(),
        "grouped native": lambda: df.groupBy("key").agg(F.avg(clamped)).collect(),
        "grouped floor groupBy(key,eps)": lambda: df.groupBy("key", level).agg(
            F.count("*"), F.sum("x")).collect(),
        "grouped column": lambda: df.groupBy("key").agg(mean_public).collect(),
        "grouped cells only": lambda: df.groupBy("key").agg(cells).collect(),
        "grouped select_keys": lambda: df.groupBy("key").agg(mean_selected).collect(),
        "grouped release": lambda: hs.agg(df, mean, by="key", keys=public_keys),
        "grouped release collect": lambda: hs.agg(df, mean, by="key",
                                                  keys=public_keys).collect(),
        "grouped native noop": lambda: _noop(df.groupBy("key").agg(F.avg(clamped))),
        "grouped floor noop": lambda: _noop(df.groupBy("key", level).agg(F.count("*"),
                                                                         F.sum("x"))),
        "grouped column noop": lambda: _noop(df.groupBy("key").agg(mean_public)),
        "grouped cells noop": lambda: _noop(df.groupBy("key").agg(cells)),
    }
    times = interleaved_runs(cases, repeats=args.repeats, warmup=1, keep_values=False)[0]
    res = {name: statistics.median(ts) for name, ts in times.items()}
    out = {"rows": args.rows, "levels": args.levels if grid is None else f"grid {args.grid}",
           "keys": args.keys,
           "python workers on a unix socket":
               spark.sparkContext.getConf().get(PYTHON_SOCKET[0], "false"),
           "seconds": res,
           "ratios": {
               "global column / native": res["global column"] / res["global native"],
               "global release / native": res["global release"] / res["global native"],
               "global floor groupBy(eps) / native":
                   res["global floor groupBy(eps)"] / res["global native"],
               "global floor count,sum,min,max / native":
                   res["global floor count,sum,min,max"] / res["global native"],
               "grouped column / native": res["grouped column"] / res["grouped native"],
               "grouped floor / native":
                   res["grouped floor groupBy(key,eps)"] / res["grouped native"],
               "grouped release / floor":
                   res["grouped release"] / res["grouped floor groupBy(key,eps)"],
               "grouped release collect / floor":
                   res["grouped release collect"] / res["grouped floor groupBy(key,eps)"],
               "noop: grouped column / native":
                   res["grouped column noop"] / res["grouped native noop"],
               "noop: grouped floor / native":
                   res["grouped floor noop"] / res["grouped native noop"],
               "noop: grouped column / floor":
                   res["grouped column noop"] / res["grouped floor noop"],
               "noop: grouped cells / floor":
                   res["grouped cells noop"] / res["grouped floor noop"],
           },
           "noop: grouped finalize seconds":
               res["grouped column noop"] - res["grouped cells noop"],
           "grouped finalize seconds": res["grouped column"] - res["grouped cells only"],
           "select_keys / grouped column": res["grouped select_keys"] / res["grouped column"],
           "round by round [p25, median, p75]": _paired(times),
           "seconds [p25, median, p75]": {name: [round(v, 3) for v in quartiles(ts)]
                                          for name, ts in times.items()},
           "groups selected": len(df.groupBy("key").agg(mean_selected).collect()),
           "load average at start": load_start, "load average at end": load_average()}
    print(json.dumps(out, indent=2))
    spark.stop()


if __name__ == "__main__":
    main()
