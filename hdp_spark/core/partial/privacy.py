"""Exact worst-case privacy loss of the attribute tree (discrete noise).

Not on the release path (nothing released depends on it): it is the exact calculator that
the tests use to check that Lemma 28's ε_tree dominates the true worst case.

The per-attribute loss of the tree stage, for one attribute flip, splits (Lemma 28's
proof, corrected orientation) into an "in" chain along the path of the string whose
count is larger in x -- at most one count of difference at each of the D levels, with
counts non-increasing going up -- and at most one "out" term of the other string, whose
sup is exactly 1/t for discrete Laplace (1/λ for continuous). :func:`worst_case_loss`
computes the exact sup of the chain over all integer count sequences c_1 >= ... >= c_D
>= 1 by a max-plus recursion, plus the out term, using the same inclusion law the driver
samples. It is the oracle that Lemma 28's ε_tree must dominate (we measure <= 0.75 ε_tree
for discrete noise). Lemma 28 and its proof are in App. A.1.1 of Ghazi, Kumar, Manurangsi
& Steinke, *Algorithms with More Granular Differential Privacy Guarantees*. Corrected
orientation: the tree is built bottom-up, so a string's count is non-increasing going up
while τ_ℓ increases; the proof's "smallest L₀" / "ℓ > L₀" read "largest L₀" / "ℓ < L₀",
the count at distance i is at least τ_ℓ + (i-1)μ - 1 (not + iμ), and "min" is "max". The
lemma's condition stands with these corrections.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["log_inclusion", "worst_case_loss"]


def log_inclusion(
    counts: npt.NDArray[np.int64], tau_level: float, mu: float, scale: float,
    *, continuous: bool = False,
) -> npt.NDArray[np.float64]:
    """ln P[max(c, τ_ℓ - μ) + noise > τ_ℓ] for an array of counts c >= 0."""
    g = np.maximum(counts.astype(np.float64), float(tau_level) - mu)
    if continuous:
        x = float(tau_level) - g  # P[Lap(λ) > x]
        with np.errstate(divide="ignore"):
            return np.where(x >= 0, math.log(0.5) - np.maximum(x, 0) / scale,
                            np.log1p(-0.5 * np.exp(np.minimum(x, 0) / scale)))
    g = np.maximum(g, 0.0)
    m = float(tau_level) - g + 1.0  # P[Z >= m], discrete Laplace
    q = math.exp(-1.0 / scale)
    return np.where(m >= 1, -m / scale - math.log1p(q),
                    np.log1p(-np.exp(-(1.0 - np.minimum(m, 1.0)) / scale) / (1.0 + q)))


def worst_case_loss(
    scale: float, mu: float, tau: float, depth: int, *, continuous: bool = False
) -> float:
    """Exact sup of the per-attribute privacy loss of the tree stage.

    Args:
        scale: t (discrete Laplace) or λ (continuous Laplace, ``continuous=True``).
        mu: the per-level bias μ.
        tau: base threshold τ (τ_ℓ = τ + (ℓ-1)μ).
        depth: D, the number of levels.
    """
    top = math.ceil(tau + depth * mu + 80 * scale) + 8
    c = np.arange(1, top, dtype=np.int64)
    best: npt.NDArray[np.float64] | None = None
    for level in range(depth, 0, -1):  # counts are non-increasing going up the tree
        tl = tau + (level - 1) * mu
        up = log_inclusion(c, tl, mu, scale, continuous=continuous)
        down = log_inclusion(c - 1, tl, mu, scale, continuous=continuous)
        r: npt.NDArray[np.float64] = np.subtract(up, down)
        best = r if best is None else r + np.maximum.accumulate(best)
    if best is None:
        return 0.0
    return float(best.max()) + 1.0 / scale
