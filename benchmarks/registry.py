"""The benchmark registry that ``benchmarks/run.py`` runs: one :class:`Entry` per benchmark
(its full and smoke argument lists, interpreter and protocol), in priority order, plus every
other ``bench_*``/``repro_*`` script found in benchmarks/ (:func:`discover`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from common import BENCH_DIR

__all__ = ["KNOWN_EXTERNAL", "REGISTRY", "Entry", "discover"]


@dataclass
class Entry:
    """One benchmark of the registry.

    Attributes:
        name: the ``--only`` name and the log/runs.md section marker.
        title: section heading.
        script: path relative to benchmarks/.
        runs: argument lists of the full run (one subprocess each).
        smoke: argument lists of the smoke run (``--smoke`` is added); None = not in smoke.
        venv: which interpreter ("main", "anchors", "tmlt").
        protocol: True if the script writes the report protocol (``--json``).
        timeout: seconds per subprocess in full mode.
        note: a sentence printed under the heading.
    """

    name: str
    title: str
    script: str
    runs: list[list[str]] = field(default_factory=lambda: [[]])
    smoke: list[list[str]] | None = field(default_factory=lambda: [[]])
    venv: str = "main"
    protocol: bool = True
    timeout: float = 3 * 3600
    note: str = ""


REGISTRY: list[Entry] = [
    # order = priority: a run on a loaded machine leaves the most important sections first
    Entry(
        "mean",
        "Mean: speed against native Spark (1M and 10M rows)",
        "bench_mean.py",
        runs=[["--rows", "1000000", "--repeats", "5"], ["--rows", "10000000", "--repeats", "9"]],
        note="Ratios of medians of interleaved runs on one cached DataFrame (issue 2 targets "
        "are reported, not asserted). \"hdp / native\" times `agg()`, which returns with the "
        "release computed and its rows in a local relation; \"with collect\" adds "
        "`.collect()` of the output (PySpark row conversion, no Spark job).",
    ),
    Entry(
        "mean-parts",
        "Mean: where the time goes (query, driver, output frame)",
        "bench_mean_parts.py",
        runs=[["--rows", "10000000", "--levels", "8"], ["--rows", "10000000", "--levels", "64"]],
        note="Each step adds one part of a release to the previous one, as a ratio to the "
        "native baseline: reading ε, grouping by ε (the release's query), the driver's exact "
        "finalize, the output frame, and collecting it.",
    ),
    Entry(
        "pandas-mean",
        "Mean on pandas: speed against pandas' own groupby and mean (1M and 10M rows)",
        "bench_pandas.py",
        runs=[["--rows", "1000000", "--repeats", "9", "--parts"],
              ["--rows", "10000000", "--repeats", "5"]],
        note="Ratios of medians of interleaved runs on one in-memory DataFrame (issue 16 "
        "targets are reported, not asserted): global against `df.groupby(eps)[x].agg([sum, "
        "count])`, grouped (100 keys) against `df[x].clip().groupby(df[key]).mean()`.",
    ),
    Entry(
        "columns",
        "Spark Column aggregators: speed against native Spark (10M rows)",
        "bench_columns.py",
        runs=[["--rows", "10000000", "--levels", "8"], ["--rows", "10000000", "--levels", "64"],
              ["--rows", "10000000", "--keys", "100000", "--repeats", "3"]],
        protocol=False,
        note="`df.agg(hdp_mean(...))` and `df.groupBy(key).agg(hdp_mean(...))` against the "
        "native average, with Spark's `groupBy([key,] eps)` and no-group floors, and what "
        "the finalize on the executors adds (issue 31 targets are reported, not asserted).",
    ),
    Entry(
        "seed001",
        "Seed 001 reproductions: Fig. 1(A), Fig. 1(B), Table II",
        "repro_seed001.py",
    ),
    Entry(
        "seed000-mean",
        "Seed 000 stand-in BENCH-M-W for the mean (spec §4.6)",
        "repro_seed000_mean.py",
    ),
    Entry("selection", "Partition selection (issue 22): release and RMSE", "bench_selection.py"),
    Entry(
        "auto",
        "method=\"auto\" against every fixed method and the default (issue 35): MC MSE",
        "bench_auto.py",
        note="Monte-Carlo MSE on seed 001's Table II profiles, seed 000's mean and frequency "
        "designs (correlated and weakly-correlated) and random mixes, pandas engine; every "
        "trial is one group of a grouped release; MC error = SE of the mean squared error.",
    ),
    Entry(
        "anchors-local",
        "Anchors locally: OpenDP and diffprivlib (homogeneous mean at ε_min)",
        "anchors/local_compare.py",
        venv="anchors",
        runs=[["--rows", "1000000", "--groups", "1000", "--repeats", "3"]],
    ),
    Entry(
        "anchors-pipelinedp",
        "Anchors on Spark: PipelineDP (homogeneous mean at ε_min)",
        "anchors/spark_compare.py",
        venv="anchors",
        runs=[
            [
                "--anchor",
                "pipelinedp",
                "--rows",
                "1000000",
                "--groups",
                "1000",
                "--repeats",
                "2",
                "--mixes",
                "high,low",
            ]
        ],
        smoke=[["--anchor", "pipelinedp"]],
    ),
    Entry(
        "scaling",
        "Scaling: rows (1M–50M), ε levels (1–4096, EpsGrid), driver memory",
        "bench_scaling.py",
    ),
    Entry(
        "solvers",
        "Driver solvers: one group's finalize per method at 1k–100k ε levels",
        "bench_solvers.py",
    ),
    Entry(
        "finalize",
        "Mean finalize on the driver: scalar per group against the batch (issue 31)",
        "bench_finalize.py",
        note="Process CPU per group (`time.process_time`, the cores are shared), median of "
        "interleaved runs, 1,000 and 100,000 groups x 8 and 64 ε levels; the batch "
        "finalize against the per-group scalar finalize in the same process.",
    ),
    Entry(
        "anchors-tumult",
        "Anchors on Spark: Tumult Analytics (homogeneous mean at ε_min)",
        "anchors/spark_compare.py",
        venv="tmlt",
        runs=[
            [
                "--anchor",
                "tumult",
                "--rows",
                "1000000",
                "--groups",
                "1000",
                "--repeats",
                "1",
                "--mixes",
                "high",
            ]
        ],
        smoke=[["--anchor", "tumult"]],
        note="Tumult's average runs a row-level Python map and materializes every measurement "
        "(anchors.md §2.4: 40–109 s per call at 1M rows), so this entry runs one mix and one "
        "timed run after a warm-up.",
    ),
]

KNOWN_EXTERNAL = {
    # script -> title; run with their own CLI (their figures: benchmarks/log/<aggregator>.md)
    "bench_histogram.py": "Histogram: speed against native Spark",
    "bench_heavy_hitters.py": "Heavy hitters: speed against native Spark",
    "repro_seed000_frequency.py": "Seed 000 frequency reproductions",
    "repro_seed000_correlated.py": "Seed 000 correlated-setting reproductions (Tables 4/5)",
    "repro_seed002.py": "Seed 002 reproductions (user-level mean)",
    "repro_seed003.py": "Seed 003 reproductions",
    "repro_seed004.py": "Seed 004 reproduction: Table 1 rows (k-way marginals, histogram, MWEM)",
    "bench_ldp_throughput.py": "LDP throughput",
    "bench_user_mean.py": "User-level mean: speed",
}


def discover() -> list[Entry]:
    """The registry plus every other bench_*/repro_* script of benchmarks/ (external)."""
    named = {e.script for e in REGISTRY}
    entries = list(REGISTRY)
    scripts = sorted({*BENCH_DIR.glob("bench_*.py"), *BENCH_DIR.glob("repro_*.py")})
    for path in scripts:
        if path.name in named:
            continue
        text = path.read_text(errors="replace")
        declares_smoke = "--smoke" in text or "add_report_args" in text
        protocol = "add_report_args" in text and "write_report" in text
        entries.append(
            Entry(
                name=path.stem.removeprefix("bench_").removeprefix("repro_").replace("_", "-"),
                title=KNOWN_EXTERNAL.get(path.name, path.stem),
                script=path.name,
                smoke=[[]] if declares_smoke else None,
                protocol=protocol,
                note="External entry: its figures are in its notebook in benchmarks/log/.",
            )
        )
    return entries
