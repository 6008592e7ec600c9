"""Coverage of the released intervals (issue 48): method × mix, mean and histogram.

An ACCURACY benchmark (no timing). For every central method of ``hdp_mean`` and
``hdp_histogram`` and every mix of ``coverage_mixes.py`` (ε independent of the values;
values comonotone with ε; Spearman 0.5 with continuous ε; n = 60; 20 % public rows) it
releases one fixed data set ``--reps`` times (independent noise per release, through the
core batch finalize the engines call) and reports:

* the coverage of the released ``ci_low``/``ci_high`` (noise half-width + ``bias_bound``)
  of the table's own statistic (the plain mean of the rows; each bin's plain frequency);
* the coverage of the noise-only interval (estimate ± the noise's half-width: what
  ``ci_low``/``ci_high`` were before issue 48);
* the released interval's average width relative to the noise-only one;
* under partition selection (``keys=select_keys``, c = 1, f = 0.5), per mix: how often the
  noise interval holds its target, the κ-weighted statistic, and the plain one (the
  released ``ci_low``/``ci_high`` are the whole range there).

β = 0.05 (the stated level: 95 %). Each coverage is a binomial proportion: over 2,000
releases its standard error at 95 % is 0.5 percentage point. The noise comes from seeded keys
(reproducible; a benchmark, not a release).

Run: .venv/bin/python benchmarks/bench_coverage.py [--reps 2000] [--smoke] [--json out.json]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, load_average, md_table, use_repo, write_report

use_repo()

from coverage_mixes import (  # noqa: E402
    HISTOGRAM_METHODS,
    MEAN_METHODS,
    MIXES,
    SELECTION,
    Coverage,
    SelectionCoverage,
    histogram_coverage,
    make_mix,
    mean_coverage,
    selected_histogram_coverage,
    selected_mean_coverage,
)

from hdp_spark.core.noise import ReleaseKey  # noqa: E402

BETA = 0.05


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _ratio(c: Coverage) -> str:
    r = c.width_ratio
    return "– (no noise)" if not math.isfinite(r) else f"{r:.3g}×"


def _table(kind: str, cells: dict[tuple[str, str], Coverage], methods: tuple[str, ...],
           mixes: tuple[str, ...]) -> str:
    rows = []
    for method in methods:
        row = [f"`{method}`"]
        for mix in mixes:
            c = cells[(method, mix)]
            flag = "" if c.honest >= 1 - BETA - 3 * math.sqrt(BETA * (1 - BETA) / c.releases) \
                else " ⚠"
            row.append(f"{_pct(c.honest)}{flag} / {_pct(c.noise_only)} / {_ratio(c)}")
        rows.append(row)
    return (f"**{kind}** (per cell: released interval's coverage / noise-only coverage / "
            "released width ÷ noise-only width)\n\n" + md_table(["method", *mixes], rows))


def _selection_table(mean: dict[str, SelectionCoverage],
                     hist: dict[str, SelectionCoverage]) -> str:
    rows = [[f"`{mix}`", f"{_pct(m.weighted)} / {_pct(m.plain_noise)} / "
             f"{_pct(m.released / m.releases)}",
             f"{_pct(h.weighted)} / {_pct(h.plain_noise)}"]
            for mix, m, h in ((x, mean[x], hist[x]) for x in mean)]
    return ("**Partition selection** (noise interval's coverage of the κ-weighted statistic / "
            "of the plain one; mean: share of releases above the threshold; `ci_low`/"
            "`ci_high` are the whole range: 100 %)\n\n"
            + md_table(["mix", "mean", "histogram"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=2000, help="releases per method and mix")
    parser.add_argument("--seed", type=int, default=4800, help="data and key seed")
    add_report_args(parser)
    args = parser.parse_args()
    # the seeded keys' once-per-release WARNING (a benchmark, not a release)
    logging.getLogger("hdp_spark").setLevel(logging.ERROR)
    print("noise from seeded keys (`unsafe_seed`): reproducible, a benchmark, not a release")
    mixes = MIXES
    mean_methods, hist_methods = MEAN_METHODS, HISTOGRAM_METHODS
    if args.smoke:
        args.reps = 40
        mean_methods, hist_methods = ("adpm", "uniform", "auto"), ("hpf-a", "auto")
    start = time.monotonic()
    mean_cells: dict[tuple[str, str], Coverage] = {}
    hist_cells: dict[tuple[str, str], Coverage] = {}
    tag = f"bench-coverage/{args.seed}"
    hist_reps = max(args.reps // 4, 10)  # 4 bins a release: about as many intervals
    for mix_name in mixes:
        mix = make_mix(mix_name, args.seed)
        for method in mean_methods:
            key = ReleaseKey.from_unsafe_seed(f"{tag}/mean/{mix_name}/{method}")
            mean_cells[(method, mix_name)] = mean_coverage(mix, method, args.reps, key, BETA)
        for method in hist_methods:
            key = ReleaseKey.from_unsafe_seed(f"{tag}/hist/{mix_name}/{method}")
            hist_cells[(method, mix_name)] = histogram_coverage(mix, method, hist_reps, key, BETA)
    sel_mean: dict[str, SelectionCoverage] = {}
    sel_hist: dict[str, SelectionCoverage] = {}
    for mix_name in mixes:
        mix = make_mix(mix_name, args.seed)
        key = ReleaseKey.from_unsafe_seed(f"{tag}/selection/{mix_name}")
        sel_mean[mix_name] = selected_mean_coverage(mix, args.reps, key, BETA, SELECTION)
        sel_hist[mix_name] = selected_histogram_coverage(mix, hist_reps, key, BETA, SELECTION)
    elapsed = time.monotonic() - start
    worst = min(c.honest for c in (*mean_cells.values(), *hist_cells.values()))
    markdown = "\n\n".join([
        f"Coverage at β = {BETA} (stated level {1 - BETA:.0%}); mean: {args.reps} releases per "
        f"cell; histogram: {hist_reps} releases × 4 bins per cell; seed {args.seed}; "
        f"{elapsed:.0f} s. ⚠ marks a coverage more than 3 standard errors below "
        f"{1 - BETA:.0%}.",
        _table("Mean", mean_cells, mean_methods, mixes),
        _table("Histogram", hist_cells, hist_methods, mixes),
        f"Smallest coverage of a released interval: {_pct(worst)}.",
        _selection_table(sel_mean, sel_hist),
    ])

    def figures(cells: dict[tuple[str, str], Coverage]) -> list[dict[str, Any]]:
        return [{"method": m, "mix": x, "releases": c.releases, "coverage": c.honest,
                 "noise_only_coverage": c.noise_only,
                 "width_ratio": c.width_ratio if math.isfinite(c.width_ratio) else None,
                 "bias_bound": c.bias_bound} for (m, x), c in cells.items()]

    write_report(args.json, name="coverage",
                 figures={"mean": figures(mean_cells), "histogram": figures(hist_cells),
                          "selection": {x: {"mean": sel_mean[x].weighted,
                                            "mean_plain": sel_mean[x].plain_noise,
                                            "histogram": sel_hist[x].weighted,
                                            "histogram_plain": sel_hist[x].plain_noise}
                                        for x in mixes},
                          "worst_coverage": worst, "seconds": elapsed},
                 markdown=markdown, meta={"load_start": load_average(), "reps": args.reps})


if __name__ == "__main__":
    main()
