"""Scaling of the heterogeneous mean on Spark: time against rows and against the number of
distinct ε levels, as ratios to native Spark in the same run, plus driver memory.

1. Rows (default 1M, 2M, 5M, 10M, 50M): 8 exact ε levels, global and grouped over
   1,000 public keys, against ``df.agg(avg)`` / ``groupBy(key).agg(avg)`` on the same data.
   Data come from ``spark.range`` and are cached when they fit comfortably in the storage
   memory of the local JVM (otherwise generated on the fly for every run, both sides paying
   the generation; the mode is reported per size).
2. ε levels (default 1..4096 exact distinct levels at 2M rows), global and grouped over 100
   keys; then continuous ε = exp(U[−4, 2]) rounded down onto an ``EpsGrid`` of ratio 2, 1.1
   and 1.01. The hdp time is split into the Spark job (``level_tables``: one
   ``groupBy(key, level).agg(count, sum)`` job) and the driver's finalize (weights, noise).
3. Continuous ε *without* a grid (every row its own level) at a small row count, to show why
   the grid exists: the level table is as large as the data and finalize runs per level.

Memory: peak RSS of the Python driver process (``getrusage``) and of the local Spark JVM
(``VmHWM`` from /proc), read after each case (both are running maxima).

Run: .venv/bin/python benchmarks/bench_scaling.py [--smoke] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

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
    plots_dir,
    pyplot,
    use_repo,
    write_report,
)

use_repo()

LOWER, UPPER = 0.0, 100.0
BYTES_PER_CACHED_ROW = 40  # x, eps, key (+ overhead), measured order of magnitude


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x]


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-list", default="1e6,2e6,5e6,10e6,50e6")
    parser.add_argument("--levels-rows", type=int, default=2_000_000)
    parser.add_argument("--levels-list", default="1,4,16,64,256,1024,4096")
    parser.add_argument("--grid-ratios", default="2,1.1,1.01")
    parser.add_argument("--nogrid-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--driver-memory", default="10g")
    add_report_args(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows_list, args.levels_rows, args.levels_list = "20000", 20000, "64"
        args.grid_ratios, args.nogrid_rows, args.repeats, args.warmup = "1.1", 1000, 1, 0
        args.driver_memory = "2g"

    from common import spark_session
    from pyspark.sql import functions as F

    import hdp_spark.aggregators as hspec  # specs (hs.hdp_mean is a Column)
    import hdp_spark.spark as hs
    from hdp_spark.core.release import plan_levels

    load_start = load_average()
    spark = spark_session(memory=args.driver_memory)
    heap_gib = float(args.driver_memory.rstrip("g"))
    storage_gib = 0.6 * (heap_gib - 0.3)  # Spark's unified memory (storage may use all of it)
    clamped = F.least(F.greatest(F.col("x"), F.lit(LOWER)), F.lit(UPPER))
    figures: dict[str, Any] = {
        "rows": [],
        "levels": [],
        "grid": [],
        "nogrid": None,
        "repeats": args.repeats,
        "driver_memory": args.driver_memory,
        "mem_available_gib_start": round(_mem_available_gib(), 1),
    }

    def timed(df: Any, spec: Any, keys: list[int] | None, split: bool) -> dict[str, Any]:
        by = "key" if keys is not None else None
        cases: dict[str, Any] = {}
        if keys is None:
            cases["native"] = lambda: df.agg(F.avg(clamped)).collect()
        else:
            cases["native"] = lambda: df.groupBy("key").agg(F.avg(clamped)).collect()
        cases["hdp"] = lambda: hs.release(df, spec, by=by, keys=keys)
        if split:
            plans = plan_levels([spec])
            key_t = None if keys is None else tuple((k,) for k in keys)
            by_t = () if keys is None else ("key",)
            cases["hdp_job"] = lambda: hs.level_tables(df, plans, by_t, key_t)
        times, _ = interleaved_runs(cases, repeats=args.repeats, warmup=args.warmup)
        out = {f"{k}_s": median(v) for k, v in times.items()}
        out["ratio"] = out["hdp_s"] / out["native_s"]
        if split:
            out["finalize_s"] = max(out["hdp_s"] - out["hdp_job_s"], 0.0)
        out["driver_rss_mib"] = driver_peak_rss_mib()
        out["jvm_rss_mib"] = jvm_peak_rss_mib(spark)
        return out

    # 1. rows
    for rows in _ints(args.rows_list):
        need_gib = rows * BYTES_PER_CACHED_ROW / 2**30
        cached = need_gib < 0.5 * storage_gib
        df = spark.range(rows).select(
            (F.rand(7) * 120 - 10).alias("x"),
            (F.col("id") % 1000).alias("key"),
            (F.lit(0.05) * F.pow(F.lit(1.1), F.col("id") % 8)).alias("eps"),
        )
        if cached:
            df = df.cache()
            t0 = time.perf_counter()
            df.count()
            cache_s = time.perf_counter() - t0
        else:
            cache_s = None
        spec = hspec.hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER)
        g = timed(df, spec, None, split=False)
        k = timed(df, spec, list(range(1000)), split=False)
        row = {"rows": rows, "cached": cached, "cache_s": cache_s, "global": g, "grouped": k}
        figures["rows"].append(row)
        print(
            "rows",
            rows,
            "cached" if cached else "on the fly",
            fmt(g["ratio"]),
            fmt(k["ratio"]),
            flush=True,
        )
        if cached:
            df.unpersist()

    # 2. exact ε levels at a fixed row count
    rows = args.levels_rows
    for levels in _ints(args.levels_list):
        df = (
            spark.range(rows)
            .select(
                (F.rand(7) * 120 - 10).alias("x"),
                (F.col("id") % 100).alias("key"),
                (F.lit(0.05) * F.pow(F.lit(1.001), (F.col("id") * 7919) % levels)).alias("eps"),
            )
            .cache()
        )
        df.count()
        spec = hspec.hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER)
        g = timed(df, spec, None, split=True)
        k = timed(df, spec, list(range(100)), split=True)
        figures["levels"].append({"levels": levels, "rows": rows, "global": g, "grouped": k})
        print("levels", levels, fmt(g["ratio"]), fmt(k["ratio"]), flush=True)
        df.unpersist()

    # 2b. continuous ε on a grid
    df = (
        spark.range(rows)
        .select(
            (F.rand(7) * 120 - 10).alias("x"),
            (F.col("id") % 100).alias("key"),
            F.exp(F.lit(-4.0) + F.lit(6.0) * F.rand(8)).alias("eps"),
        )
        .cache()
    )
    df.count()
    for ratio in [float(x) for x in args.grid_ratios.split(",") if x]:
        grid = hs.EpsGrid(ratio=ratio, lowest=1e-3, highest=1e3)
        spec = hspec.hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER, eps_grid=grid)
        n_levels = len([p for p in grid.points() if 0.0183 / ratio <= p <= 7.39])
        g = timed(df, spec, None, split=True)
        k = timed(df, spec, list(range(100)), split=True)
        figures["grid"].append(
            {"ratio": ratio, "levels_in_range": n_levels, "rows": rows, "global": g, "grouped": k}
        )
        print("grid", ratio, n_levels, fmt(g["ratio"]), fmt(k["ratio"]), flush=True)
    df.unpersist()

    # 3. continuous ε without a grid: every row is a level
    nrows = args.nogrid_rows
    df = (
        spark.range(nrows)
        .select(
            (F.rand(7) * 120 - 10).alias("x"),
            F.exp(F.lit(-4.0) + F.lit(6.0) * F.rand(8)).alias("eps"),
        )
        .cache()
    )
    df.count()
    spec = hspec.hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER)
    figures["nogrid"] = {"rows": nrows, "global": timed(df, spec, None, split=True)}
    print("nogrid", nrows, figures["nogrid"], flush=True)
    df.unpersist()

    figures["load_start"] = load_start
    figures["load_end"] = load_average()
    plots = make_plots(args.plots, figures)
    write_report(args.json, name="scaling", figures=figures, markdown=render(figures), plots=plots)
    spark.stop()


def render(fig: dict[str, Any]) -> str:
    out = [
        f"local[2], driver memory {fig['driver_memory']} "
        f"(MemAvailable at start {fig['mem_available_gib_start']} GiB), medians of "
        f"{fig['repeats']} interleaved runs after one warm-up. Ratio = hdp / native on the same "
        "DataFrame. RSS = running peak of the Python driver / the Spark JVM after the case.",
        "",
        "**Rows** (8 exact ε levels; grouped = 1,000 public keys):",
        "",
    ]
    rows = []
    for r in fig["rows"]:
        g, k = r["global"], r["grouped"]
        rows.append(
            [
                f"{r['rows']:,}",
                "cached" if r["cached"] else "on the fly",
                fmt(g["native_s"]),
                fmt(g["hdp_s"]),
                fmt(g["ratio"]),
                fmt(k["native_s"]),
                fmt(k["hdp_s"]),
                fmt(k["ratio"]),
                fmt(k["driver_rss_mib"]),
                fmt(k["jvm_rss_mib"]) if k["jvm_rss_mib"] else "—",
            ]
        )
    out.append(
        md_table(
            [
                "rows",
                "data",
                "native s",
                "hdp s",
                "ratio",
                "native grouped s",
                "hdp grouped s",
                "ratio grouped",
                "driver RSS MiB",
                "JVM RSS MiB",
            ],
            rows,
        )
    )
    out.append("")
    out.append(
        f"**Distinct ε levels** ({fig['levels'][0]['rows']:,} cached rows; grouped = 100 "
        "public keys; job = the Spark `groupBy(key, level)` pass, finalize = driver):"
        if fig["levels"]
        else ""
    )
    out.append("")
    rows = []
    for r in fig["levels"]:
        g, k = r["global"], r["grouped"]
        rows.append(
            [
                f"{r['levels']:,}",
                fmt(g["native_s"]),
                fmt(g["hdp_s"]),
                fmt(g["ratio"]),
                fmt(g["finalize_s"]),
                fmt(k["native_s"]),
                fmt(k["hdp_s"]),
                fmt(k["ratio"]),
                fmt(k["finalize_s"]),
                fmt(k["driver_rss_mib"]),
            ]
        )
    for r in fig["grid"]:
        g, k = r["global"], r["grouped"]
        rows.append(
            [
                f"grid {r['ratio']:g} (~{r['levels_in_range']} levels)",
                fmt(g["native_s"]),
                fmt(g["hdp_s"]),
                fmt(g["ratio"]),
                fmt(g["finalize_s"]),
                fmt(k["native_s"]),
                fmt(k["hdp_s"]),
                fmt(k["ratio"]),
                fmt(k["finalize_s"]),
                fmt(k["driver_rss_mib"]),
            ]
        )
    out.append(
        md_table(
            [
                "ε levels",
                "native s",
                "hdp s",
                "ratio",
                "finalize s",
                "native grouped s",
                "hdp grouped s",
                "ratio grouped",
                "finalize grouped s",
                "driver RSS MiB",
            ],
            rows,
        )
    )
    out.append("")
    ng = fig["nogrid"]
    if ng:
        g = ng["global"]
        out.append(
            f"**Continuous ε without a grid** ({ng['rows']:,} rows = {ng['rows']:,} levels, "
            f"global): native {fmt(g['native_s'])} s, hdp {fmt(g['hdp_s'])} s (ratio "
            f"{fmt(g['ratio'])}; Spark job {fmt(g['hdp_job_s'])} s, finalize "
            f"{fmt(g['finalize_s'])} s), driver RSS {fmt(g['driver_rss_mib'])} MiB. "
            "Use an `EpsGrid` for continuous ε."
        )
        out.append("")
    out.append(
        "Plot: `plots/scaling_rows.png`, `plots/scaling_levels.png`. Load average at "
        f"start {fig['load_start']}, at end {fig['load_end']}."
    )
    return "\n".join(out)


def make_plots(arg: Path | None, fig: dict[str, Any]) -> list[Path]:
    plt = pyplot()
    if plt is None:
        return []
    out_dir = plots_dir(arg)
    paths = []
    if fig["rows"]:
        rows = [r["rows"] for r in fig["rows"]]
        f, ax = plt.subplots(figsize=(6, 4))
        for shape, style in (("global", "-"), ("grouped", "--")):
            ax.plot(
                rows,
                [r[shape]["native_s"] for r in fig["rows"]],
                "o" + style,
                label=f"native {shape}",
            )
            ax.plot(
                rows, [r[shape]["hdp_s"] for r in fig["rows"]], "s" + style, label=f"hdp {shape}"
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows")
        ax.set_ylabel("seconds (median)")
        ax.set_title("Mean on Spark local[2]: time vs rows (8 ε levels)")
        ax.legend()
        f.tight_layout()
        paths.append(out_dir / "scaling_rows.png")
        f.savefig(paths[-1], dpi=110)
        plt.close(f)
    if fig["levels"]:
        lv = [r["levels"] for r in fig["levels"]]
        f, ax = plt.subplots(figsize=(6, 4))
        for shape, style in (("global", "-"), ("grouped", "--")):
            ax.plot(
                lv,
                [r[shape]["ratio"] for r in fig["levels"]],
                "o" + style,
                label=f"hdp / native, {shape}",
            )
            ax.plot(
                lv,
                [r[shape]["finalize_s"] for r in fig["levels"]],
                "x" + style,
                label=f"finalize s, {shape}",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("distinct ε levels")
        ax.set_title(f"Mean on Spark: ε levels ({fig['levels'][0]['rows']:,} rows)")
        ax.legend()
        f.tight_layout()
        paths.append(out_dir / "scaling_levels.png")
        f.savefig(paths[-1], dpi=110)
        plt.close(f)
    return paths


if __name__ == "__main__":
    main()
