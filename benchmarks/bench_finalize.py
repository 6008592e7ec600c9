"""Driver CPU of the mean's finalize per group: the scalar path against the batch path.

For G groups (default 1,000 and 100,000) with L ε levels each (default 8 and 64; levels
0.05·1.1^i, 1-2,000 rows per level), times in one process, interleaved:

  scalar  ``MeanKernel.finalize`` once per group (the release API's per-group loop
          before issue 31);
  batch   ``MeanKernel.finalize_batch`` once for all groups (columnar cells built from the
          same ``GroupStats`` tables, included in the time), read as one record per group
          and per ε level (what a reader of a release's results, a job or a report, pays;
          the release keeps the columns and builds these only when they are read);
  columns ``finalize_mean_columns`` on the same columnar cells (built outside the time):
          the same figures as lists, no record per group or level (what the Column
          aggregators' Arrow finalize and the release API's output frame are built from);
  batch, gc paused  the same call with Python's cyclic garbage collector paused, to show
          what the collector costs while 100,000s of result records are built (reported,
          not what the library does);
  auto choice  what ``method="auto"`` adds before the batch: the predictions of every
          candidate and the choice per group (``choose_mean_cells`` on the columnar cells;
          issue 35), reported as µs per group and as a share of the batch figure.

With ``--categories K`` (default 10; 0 skips it) the histogram's finalize is timed the same
way on K categories plus the ``other`` bin (``hpf-a``; 0-200 rows per cell):

  histogram scalar  ``finalize_histogram`` once per group (the per-group path before the
          histogram's batch, its reference);
  histogram batch   ``HistogramKernel.finalize_batch`` once for all groups (every bin of
          every group drawn in one call), then ``values`` per group (the released rows);

reported per group and per released bin.

Time is process CPU (``time.process_time``): the machine's 2 cores are shared, and wall
time would count other people's work. The figure is µs per group, median of --repeats;
the ratio batch/scalar comes from one run. Both paths must give the same results (checked
on every run: equal released estimates). Targets are reported, never asserted.

Run: .venv/bin/python benchmarks/bench_finalize.py [--groups 1000,100000] [--levels 8,64]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, fmt, load_average, md_table, median, use_repo, write_report

use_repo()

TARGET_US = 15.0


def _tables(groups: int, levels: int, seed: int) -> list[Any]:
    from hdp_spark.core.stats import GroupStats, LevelRow

    rnd = random.Random(seed)
    eps = [0.05 * 1.1**i for i in range(levels)]
    out = []
    for _ in range(groups):
        rows = []
        for e in eps:
            c = rnd.randint(1, 2000)
            rows.append(LevelRow(e, c, (rnd.randint(0, c * 2**31),)))
        out.append(GroupStats(tuple(rows)))
    return out


def _histogram_case(groups: int, levels: int, categories: int, repeats: int
                    ) -> dict[str, float]:
    """µs per group of the histogram's scalar finalize, batch finalize and values."""
    from hdp_spark.aggregators import hdp_histogram
    from hdp_spark.core.histogram.finalize import finalize_histogram
    from hdp_spark.core.kernels import HistogramKernel
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.stats import GroupStats, LevelRow

    rnd = random.Random(groups * 7 + levels)
    spec = hdp_histogram("x", eps="eps", categories=[f"c{j}" for j in range(categories)])
    eps = [0.05 * 1.1**i for i in range(levels)]
    stats = []
    for _ in range(groups):
        rows = []
        for e in eps:
            totals = tuple(rnd.randint(0, 200) for _ in range(categories + 1))
            rows.append(LevelRow(e, sum(totals), totals))
        stats.append(GroupStats(tuple(rows)))
    key = ReleaseKey.from_unsafe_seed(31)
    kernel = HistogramKernel()
    order = tuple((i,) for i in range(groups))
    times: dict[str, list[float]] = {"scalar": [], "batch": [], "values": []}
    for _ in range(repeats):
        t0 = time.process_time()
        want = [finalize_histogram(spec, s, key, k) for s, k in zip(stats, order, strict=True)]
        t1 = time.process_time()
        got = kernel.finalize_batch(spec, stats, 0, key, order, "x")
        t2 = time.process_time()
        for r in got:
            kernel.values(spec, r)
        t3 = time.process_time()
        times["scalar"].append(t1 - t0)
        times["batch"].append(t2 - t1)
        times["values"].append(t3 - t2)
        if [r.noisy for r in want] != [r.noisy for r in got]:
            msg = "batch and scalar histogram finalize disagree"
            raise SystemExit(msg)
    return {k: median(v) / groups * 1e6 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="1000,100000")
    parser.add_argument("--levels", default="8,64")
    parser.add_argument("--method", default="adpm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--categories", type=int, default=10)
    add_report_args(parser)
    args = parser.parse_args()
    groups_list = [int(x) for x in args.groups.split(",") if x]
    levels_list = [int(x) for x in args.levels.split(",") if x]
    if args.smoke:
        groups_list, levels_list, args.repeats = [200], [8], 1

    import logging

    from hdp_spark.aggregators import hdp_mean
    from hdp_spark.core.kernels import MeanKernel
    from hdp_spark.core.mean.auto import choose_mean_cells
    from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.pipeline import GroupCells, NoiseContext

    logging.getLogger("hdp_spark").setLevel(logging.ERROR)  # the seeded key's warning
    load_start = load_average()
    kernel = MeanKernel()
    spec = hdp_mean("x", eps="eps", lower=0, upper=100, method=args.method)
    key = ReleaseKey.from_unsafe_seed(31)
    figures: dict[str, Any] = {}
    rows = []
    for g in groups_list:
        for lv in levels_list:
            stats = _tables(g, lv, seed=g + lv)
            order = tuple((i,) for i in range(g))

            def scalar(stats: list[Any] = stats, order: tuple[Any, ...] = order
                       ) -> list[Any]:
                return [kernel.finalize(spec, GroupCells(s, 0), NoiseContext(key, k, "x"))
                        for s, k in zip(stats, order, strict=True)]

            def batch(stats: list[Any] = stats, order: tuple[Any, ...] = order
                      ) -> list[Any]:
                return list(kernel.finalize_batch(spec, stats, 0, key, order, "x"))

            cells = MeanCells.from_stats(stats, 0)

            def columns(cells: Any = cells, order: tuple[Any, ...] = order) -> list[Any]:
                return finalize_mean_columns(spec, cells, 0, key, order, "x").estimate

            def choice(cells: Any = cells) -> list[Any]:
                choose_mean_cells(cells.offsets, cells.levels, cells.counts, spec.beta)
                return []

            times: dict[str, list[float]] = {"scalar": [], "batch": [], "batch_nogc": [],
                                             "columns": [], "auto_choice": []}
            check: dict[str, list[Any]] = {}
            for _ in range(args.repeats):
                for name, fn, pause in (("scalar", scalar, False), ("batch", batch, False),
                                        ("batch_nogc", batch, True),
                                        ("columns", columns, False),
                                        ("auto_choice", choice, False)):
                    if pause:
                        gc.disable()
                    t0 = time.process_time()
                    out = fn()
                    times[name].append(time.process_time() - t0)
                    gc.enable()
                    if out:
                        check[name] = [getattr(r, "estimate", r) for r in out]
                    del out
            if not check["scalar"] == check["batch"] == check["columns"]:
                msg = "batch and scalar finalize disagree"
                raise SystemExit(msg)
            us = {k: median(v) / g * 1e6 for k, v in times.items()}
            ratio = us["batch"] / us["scalar"]
            figures[f"{g}x{lv}"] = {**{f"{k}_us_per_group": v for k, v in us.items()},
                                    "batch_over_scalar": ratio}
            rows.append([f"{g:,}", lv, fmt(us["scalar"]), fmt(us["batch"]),
                         fmt(us["batch_nogc"]), fmt(ratio), fmt(us["columns"]),
                         fmt(us["auto_choice"]),
                         f"{100 * us['auto_choice'] / us['batch']:.1f} %",
                         fmt(us["batch"] * 100_000 / 1e6), TARGET_US])
            print(g, lv, {k: fmt(v) for k, v in us.items()}, flush=True)
    hist_rows = []
    if args.categories > 0:
        for g in groups_list:
            for lv in levels_list:
                us = _histogram_case(g, lv, args.categories, args.repeats)
                bins = args.categories + 1
                figures[f"histogram_{g}x{lv}"] = {
                    "categories": args.categories,
                    **{f"{k}_us_per_group": v for k, v in us.items()}}
                hist_rows.append([f"{g:,}", lv, bins, fmt(us["scalar"]), fmt(us["batch"]),
                                  fmt(us["values"]), fmt(us["batch"] / us["scalar"]),
                                  fmt(us["batch"] / bins)])
                print("histogram", g, lv, {k: fmt(v) for k, v in us.items()}, flush=True)
    histogram_md = "" if not hist_rows else (
        "\n\nHistogram finalize (hpf-a) on the driver, process CPU per group, median of "
        f"{args.repeats} interleaved runs; \"values\" is the released rows built from the "
        "batch's results.\n\n"
        + md_table(["groups", "ε levels", "bins", "scalar µs", "batch µs", "values µs",
                    "batch / scalar", "batch µs per bin"], hist_rows))
    markdown = (
        f"Mean finalize ({args.method}) on the driver, process CPU per group, median of "
        f"{args.repeats} interleaved runs; batch/scalar in the same run. \"s per 100k\" "
        "extrapolates the batch figure to 100,000 groups.\n\n"
        + md_table(["groups", "ε levels", "scalar µs", "batch µs", "batch µs, gc paused",
                    "batch / scalar", "columns µs", "auto choice µs", "auto choice / batch",
                    "batch s per 100k", "target µs"], rows)
        + histogram_md
        + f"\n\nLoad average at start {load_start}, at end {load_average()}."
    )
    write_report(args.json, name="finalize", figures=figures, markdown=markdown,
                 meta={"groups": groups_list, "levels": levels_list, "method": args.method,
                       "repeats": args.repeats, "load_start": load_start})


if __name__ == "__main__":
    main()
