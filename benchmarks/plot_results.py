"""Draw the summary plots of benchmarks/RESULTS.md from the figures recorded in benchmarks/log/.

This script runs no benchmark: the tables below copy figures from the recorded runs (each
names its source), and the plots are drawn from them. Re-run it after updating a table:

    .venv/bin/python benchmarks/plot_results.py            # writes benchmarks/plots/results_*.png

Plots:
  results_speed.png    ratio to native Spark per aggregator: the range over recorded runs,
                       the latest run, the target, and the engine's own floor for the same pass
  results_anchors.png  hdp_spark against the anchor libraries (homogeneous mean at ε_min):
                       MSE ratio and time ratio, 1M rows, 1,000 groups
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, pyplot

# --------------------------------------------------------------------------- recorded figures
# (label, target or None, ratios of the recorded runs (oldest first), floor range or None)
# Mean, 10M cached rows, agg() / native: the nine runs of 2026-11-26 04:37-08:19 UTC
# (log/2026-11-notebook.md, tables of the 04:06, 06:07 and 08:02 sections; log/runs.md "Mean").
# Floors: Spark's own groupBy([key,] ε) query, as recorded by mean-parts (log/runs.md) and the
# notebook's ad-hoc decompositions (04:06, 08:02 sections).
SPEED: list[tuple[str, float | None, list[float], tuple[float, float] | None]] = [
    (
        "mean, global, 1 level",
        1.5,
        [1.51, 1.75, 1.64, 1.69, 1.50, 1.77, 1.57, 1.73, 1.83],
        (1.35, 1.52),
    ),
    (
        "mean, global, 8 levels",
        1.5,
        [1.87, 1.80, 1.61, 1.43, 1.76, 1.76, 1.84, 1.93, 1.66],
        (1.30, 1.52),
    ),
    (
        "mean, global, 64 levels",
        2.0,
        [1.46, 1.87, 1.73, 1.59, 1.63, 1.71, 1.87, 1.52, 1.75],
        (1.50, 1.82),
    ),
    (
        "mean, 1,000 keys, 8 levels",
        2.0,
        [1.60, 1.66, 1.69, 1.68, 1.67, 1.71, 1.58, 1.59, 1.72],
        (1.23, 1.23),
    ),
    (
        "mean, 1,000 keys, 64 levels",
        2.0,
        [1.99, 2.15, 2.06, 2.06, 1.94, 2.13, 2.17, 2.45, 2.11],
        (1.20, 1.40),
    ),
    # EpsGrid(ratio=1.1), continuous ε, 10M rows: notebook sections 04:06, 06:07, 08:02 (08:30
    # run); floor = the level expression alone (global) / the groupBy(key, level) query.
    ("mean, EpsGrid 1.1, global", None, [2.72, 2.34, 2.86], (2.03, 2.33)),
    ("mean, EpsGrid 1.1, 100 keys", None, [2.55, 2.06, 2.32], (1.97, 1.97)),
    # Histogram, 10M rows, 100 categories: log/histogram.md (loaded run, then quiet run);
    # floor = the release's Spark job alone (histogram_tables).
    ("histogram, 100 categories", 2.0, [1.49, 1.81], (1.25, 1.59)),
    # Heavy hitters: log/heavy_hitters.md, the four runs at 1M rows and the 10M run.
    ("heavy hitters, 16 attrs, 1M–10M", 6.0, [3.72, 2.73, 4.32, 4.49, 4.77], None),
]

# Anchors, homogeneous DP mean at ε_min against hdp_spark's ADPM at each row's ε (grid 1.1),
# 1M rows, 1,000 public groups (log/runs.md: anchors-local 05:34, anchors-pipelinedp 05:39,
# anchors-tumult 05:36 UTC). (anchor, case) -> (anchor time / hdp time, anchor MSE / hdp MSE).
# Spark anchors are timed against hdp on Spark, local ones against hdp's pandas engine.
CASES = ("high, grouped", "low, grouped", "high, global", "low, global")
ANCHORS: dict[str, dict[str, tuple[float, float]]] = {
    "PipelineDP\n(Spark)": {
        "high, grouped": (27.41, 55.29),
        "low, grouped": (71.32, 2.439),
        "high, global": (42.56, 1.308),
        "low, global": (120.8, 0.778),
    },
    "Tumult\n(Spark)": {
        "high, grouped": (20.82, 51.08),
        "high, global": (62.28, 0.8022),
    },
    "OpenDP\n(Polars)": {
        "high, grouped": (1.206, 66.23),
        "low, grouped": (3.434, 2.64),
        "high, global": (11.08, 0.5563),
        "low, global": (13.4, 0.6689),
    },
    "diffprivlib\n(NumPy)": {
        "high, grouped": (0.1649, 62.45),
        "low, grouped": (0.4996, 2.426),
        "high, global": (0.05046, 0.4802),
        "low, global": (0.05768, 1.083),
    },
    "hdp uniform\n(ε_min, pandas)": {
        "high, grouped": (0.8466, 72.11),
        "low, grouped": (1.026, 2.457),
        "high, global": (0.9587, 1.138),
        "low, global": (0.9872, 1.387),
    },
}


def plot_speed(plt: object, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8.5, 4.8))  # type: ignore[attr-defined]
    ys = list(range(len(SPEED)))[::-1]
    for y, (_label, target, runs, floor) in zip(ys, SPEED, strict=True):
        if floor is not None:
            lo, hi = floor
            ax.plot([lo / 1.008, max(hi, lo * 1.008)], [y - 0.22] * 2, color="0.55", lw=5,
                    solid_capstyle="butt", label="floor: the engine's own query" if y == ys[0]
                    else None)
        ax.plot([min(runs), max(runs)], [y, y], color="tab:blue", lw=5, solid_capstyle="butt",
                alpha=0.45, label="hdp / native, range over runs" if y == ys[0] else None)
        ax.plot(runs[-1], y, "o", color="tab:blue",
                label="hdp / native, latest run" if y == ys[0] else None)
        if target is not None:
            ax.plot(target, y, "|", color="tab:red", ms=18, mew=2.5,
                    label="target" if y == ys[0] else None)
    ax.set_yticks(ys, [row[0] for row in SPEED])
    ax.set_xscale("log")
    ticks = [1, 1.5, 2, 3, 4, 6]
    ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(0.95, 7)
    ax.axvline(1, color="0.8", lw=1)
    ax.set_xlabel("time / native Spark for the same result (ratio of medians, same run)")
    ax.set_title("Speed against native Spark, 2 cores, local[2] (10M rows unless noted)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)  # type: ignore[attr-defined]


def plot_anchors(plt: object, path: Path) -> None:
    fig, (ax_mse, ax_time) = plt.subplots(1, 2, figsize=(11, 4.3))  # type: ignore[attr-defined]
    names = list(ANCHORS)
    width = 0.2
    colors = {"high, grouped": "tab:blue", "low, grouped": "tab:cyan",
              "high, global": "tab:orange", "low, global": "tab:olive"}
    for ax, index, title in (
        (ax_mse, 1, "MSE of the anchor / MSE of hdp (higher = hdp more accurate)"),
        (ax_time, 0, "time of the anchor / time of hdp (higher = hdp faster)"),
    ):
        for k, case in enumerate(CASES):
            xs, vals = [], []
            for i, name in enumerate(names):
                if case in ANCHORS[name]:
                    xs.append(i + (k - 1.5) * width)
                    vals.append(ANCHORS[name][case][index])
            ax.bar(xs, vals, width, color=colors[case], label=f"ε mix {case}")
        ax.axhline(1, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_title(title, fontsize=9)
    handles, labels = ax_mse.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle("hdp_spark (ADPM at each row's ε) against a homogeneous DP mean at ε_min; "
                 "1M rows, 1,000 groups", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "plots")
    args = parser.parse_args()
    plt = pyplot()
    if plt is None:
        print("matplotlib is not installed", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    plot_speed(plt, args.out / "results_speed.png")
    plot_anchors(plt, args.out / "results_anchors.png")
    print(f"wrote {args.out / 'results_speed.png'} and {args.out / 'results_anchors.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
