"""Driver-side cost of the mean's weight solvers against the number of distinct ε levels.

For every method of ``hdp_mean`` and G distinct ε levels (default 1k, 10k, 100k; ε spread
log-uniformly over [e^-8, e^6], 1-50 rows per level, 5 % of rows public), times one group's
finalize (weights, exact η, the Laplace draw) and records the peak Python allocation of the
weight solver (``tracemalloc``). No Spark: this is the per-group work the driver does after
the level table is collected, so its growth with G is what matters.

Run: .venv/bin/python benchmarks/bench_solvers.py [--levels 1000,10000,100000] [--smoke]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, fmt, md_table, median, use_repo, write_report

use_repo()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    add_report_args(parser)
    args = parser.parse_args()
    levels_list = [int(x) for x in args.levels.split(",") if x]
    if args.smoke:
        levels_list, args.repeats = [200], 1

    import numpy as np

    from hdp_spark.aggregators import hdp_mean
    from hdp_spark.core.mean.finalize import finalize_mean, mean_weights
    from hdp_spark.core.mean.spec import MEAN_METHODS
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.stats import GroupStats, LevelRow

    figures: dict[str, dict[str, dict[str, float]]] = {}
    rows = []
    for g in levels_list:
        rng = np.random.default_rng(g)
        eps = np.sort(np.unique(np.exp(rng.uniform(-8, 6, size=g))))[: g - 1].tolist()
        eps.append(math.inf)
        counts = rng.integers(1, 50, size=len(eps)).tolist()
        counts[-1] = max(1, int(0.05 * sum(counts)))
        stats = GroupStats(tuple(
            LevelRow(e, int(c), (int(rng.integers(0, int(c) * 2**31)),))
            for e, c in zip(eps, counts, strict=True)
        ))
        figures[str(g)] = {}
        for method in MEAN_METHODS:
            spec = hdp_mean("x", eps="eps", lower=0, upper=1, method=method)
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                finalize_mean(spec, stats, 0, ReleaseKey.fresh(), (), "x")
                times.append(time.perf_counter() - t0)
            tracemalloc.start()
            mean_weights(spec, list(stats.levels), list(stats.counts))
            _cur, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            figures[str(g)][method] = {"finalize_s": median(times), "solver_peak_mib": peak / 2**20}
            rows.append([f"{g:,}", method, fmt(median(times)), fmt(peak / 2**20, 3)])
            print(g, method, fmt(median(times)), flush=True)
    markdown = (
        "One group's finalize (weights + exact η + Laplace draw) on the driver, median of "
        f"{args.repeats}, and the weight solver's peak Python allocation.\n\n"
        + md_table(["ε levels", "method", "finalize s", "solver peak MiB"], rows)
    )
    write_report(args.json, name="solvers", figures=figures, markdown=markdown,
                 meta={"levels": levels_list, "repeats": args.repeats})


if __name__ == "__main__":
    main()
