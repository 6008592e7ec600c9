"""The data of the anchor comparisons: seed 001 §4.3's heterogeneous ε mixes.

* ε: natural log ε_i ~ U[a, b], drawn per row: "low" variance (a, b) = (-3, -2), "high"
  variance (a, b) = (-4, 2) (spec seed-001 §4.3, Table II).
* x: Beta(2, 3) shifted by -0.5 onto the public domain [-0.5, 0.5]; population mean
  μ = -0.1, variance σ² = 0.04. On Spark Beta(2, 3) is the 2nd smallest of 4 uniforms, so
  generation is native (no Python per row).
* groups: ``key = id % groups``, so each group is an independent sample of rows/groups rows:
  with 1M rows and 1,000 groups every group is Table II's n = 1,000 experiment, and one
  grouped release yields 1,000 independent errors.

A homogeneous library can only run at one ε for everybody: the smallest, ε_min = min_i ε_i
(public in this model, like every ε_i).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIXES: dict[str, tuple[float, float]] = {"low": (-3.0, -2.0), "high": (-4.0, 2.0)}
LOWER, UPPER = -0.5, 0.5
MU = 2 / 5 - 0.5  # Beta(2, 3) mean, shifted
SIGMA2 = 2 * 3 / (5**2 * 6)  # Beta(2, 3) variance = 0.04


def eps_numpy(mix: str, n: int, rng: np.random.Generator) -> np.ndarray:
    a, b = MIXES[mix]
    return np.exp(rng.uniform(a, b, n))


def values_numpy(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.beta(2.0, 3.0, n) - 0.5


def frame_numpy(rows: int, groups: int, mix: str, seed: int) -> dict[str, np.ndarray]:
    """Columns id, key, x, eps (numpy), the same recipe as :func:`frame_spark`."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    return {
        "id": ids,
        "key": ids % groups,
        "x": values_numpy(rows, rng),
        "eps": eps_numpy(mix, rows, rng),
    }


def frame_spark(spark: Any, rows: int, groups: int, mix: str, seed: int) -> Any:
    """Columns id, key, one, x, eps generated natively with ``spark.range``."""
    from pyspark.sql import functions as F

    a, b = MIXES[mix]
    uniforms = F.array(*[F.rand(seed * 10 + i) for i in range(4)])
    return spark.range(rows).select(
        F.col("id"),
        (F.col("id") % groups).alias("key"),
        F.lit(0).alias("one"),
        (F.sort_array(uniforms).getItem(1) - F.lit(0.5)).alias("x"),
        F.exp(F.lit(a) + F.lit(b - a) * F.rand(seed * 10 + 4)).alias("eps"),
    )


def errors(estimates: dict[Any, float], truth: float | dict[Any, float]) -> np.ndarray:
    """estimate - truth for every group (truth: one number or a per-group dict)."""
    keys = sorted(estimates)
    est = np.array([estimates[k] for k in keys], dtype=float)
    if isinstance(truth, dict):
        return est - np.array([truth[k] for k in keys], dtype=float)
    return est - truth


def mse_summary(errs: np.ndarray) -> dict[str, float]:
    """MSE with its standard error (errors are independent across groups and repeats)."""
    sq = np.asarray(errs, dtype=float) ** 2
    return {
        "mse": float(sq.mean()),
        "mse_se": float(sq.std(ddof=1) / np.sqrt(sq.size)) if sq.size > 1 else 0.0,
        "samples": int(sq.size),
    }
