"""Helpers shared by the histogram tests (no fixtures; imported by name)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.histogram.finalize import (
    HistogramResult,
    bin_statistics,
    finalize_histogram,
    released_counts,
)
from hdp_spark.core.histogram.spec import HistogramSpec, histogram_weights
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import GroupStats, LevelRow


def backend(engine_name: str) -> ModuleType:
    """The backend package of an engine."""
    return importlib.import_module(f"hdp_spark.{engine_name}")


def run_histogram(engine: Any, pdf: pd.DataFrame, spec: HistogramSpec, **kwargs: Any) -> Any:
    """Release on ``engine`` and return the output as pandas."""
    out = backend(engine.name).histogram(engine.frame(pdf), spec, **kwargs)
    return out if engine.name == "pandas" else out.toPandas()


def stats_from_rows(
    spec: HistogramSpec, eps: Sequence[float], codes: Sequence[int]
) -> GroupStats:
    """A group's level table built directly from per-row (ε level, category code) pairs."""
    width = len(spec.categories) + 1
    acc: dict[float, list[int]] = {}
    for e, c in zip(eps, codes, strict=True):
        acc.setdefault(float(e), [0] * width)[c] += 1
    rows = tuple(LevelRow(lv, sum(t), tuple(t)) for lv, t in sorted(acc.items()))
    return GroupStats(rows)


def statistics_of(spec: HistogramSpec, stats: GroupStats) -> tuple[Fraction, ...]:
    """Exact pre-noise statistics of a group (weights of the spec's method)."""
    w = histogram_weights(spec, stats.levels, stats.counts)
    return bin_statistics(w, released_counts(spec, stats), spec.k)


def true_frequencies(spec: HistogramSpec, stats: GroupStats) -> list[Fraction]:
    """μ_j = (rows in released bin j) / n."""
    counts = released_counts(spec, stats)
    n = stats.n
    return [Fraction(sum(row[j] for row in counts), n) for j in range(spec.k)]


def releases(
    spec: HistogramSpec, stats: GroupStats, trials: int, tag: str = "t"
) -> list[HistogramResult]:
    """``trials`` independent releases of the same group (distinct unsafe seeds)."""
    weights = histogram_weights(spec, stats.levels, stats.counts)
    return [
        finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(f"{tag}-{i}"), (), weights)
        for i in range(trials)
    ]


def noise_matrix(
    results: Sequence[HistogramResult], statistics: Sequence[Fraction]
) -> np.ndarray:
    """trials × k matrix of unclipped noise, y_j - a_j."""
    return np.array(
        [[float(y - a) for y, a in zip(r.noisy, statistics, strict=True)] for r in results]
    )


def harmonic(k: int) -> tuple[float, float]:
    """(H_k, Σ_{i<=k} 1/i²)."""
    return sum(1 / i for i in range(1, k + 1)), sum(1 / i**2 for i in range(1, k + 1))


def max_abs_laplace_quantile(scale: float, k: int, level: float) -> float:
    """The ``level`` quantile of max_j |N_j| for k iid Laplace(scale)."""
    return scale * -math.log(1 - level ** (1 / k))


def engines_agree(spark: Any, method: str, seed: int, ratio: float, log_eps: tuple[float, float]
                  ) -> pd.DataFrame:
    """O27: the same seed and data give identical grouped outputs on pandas and Spark for
    ``method`` (public ε = inf and ε = 0 rows, nulls, out-of-domain labels, a key without
    rows). Returns the pandas frame for method-specific checks."""
    from hdp_spark.aggregators import hdp_histogram
    from hdp_spark.core.levels import EpsGrid

    rng = np.random.default_rng(seed)
    n = 300
    pdf = pd.DataFrame({
        "c": rng.choice(["a", "b", "c", "zz", None], n),
        "eps": np.exp(rng.uniform(*log_eps, n)),
        "g": rng.choice(["x", "y"], n),
    })
    pdf.loc[:5, "eps"] = math.inf
    pdf.loc[6:8, "eps"] = 0.0
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "c"], method=method,  # type: ignore[arg-type]
                         eps_grid=EpsGrid(ratio=ratio, lowest=0.01, highest=100.0))
    kwargs: dict[str, Any] = {"by": "g", "keys": ["x", "y", "w"], "unsafe_seed": seed + 5}
    local = backend("pandas").histogram(pdf, spec, **kwargs)
    remote = backend("spark").histogram(spark.createDataFrame(pdf).repartition(3), spec,
                                        **kwargs).toPandas()
    pd.testing.assert_frame_equal(local, remote)
    assert set(local["method"]) == {method}
    out: pd.DataFrame = local
    return out
