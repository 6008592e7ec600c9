"""Driver finalize of the frequency oracle: (j, b) counts -> pmf.

Server side of Algorithm 5 (§4) of Aliakbarpour, Fallah, Roy & Stevens, *High-Probability
Bounds For Heterogeneous Local Differential Privacy*, after Bassily & Smith (2015). Not
privacy-critical: it post-processes reports that are already ε_i-LDP.

Reports are (j_i, b_i). With per-row weights w_i (Σ w_i = 1, functions of ε only) and
c_i = coth(ε_i/2), the compact form of the estimator (Algorithm 5, lines 9-11, regrouped
by projection row) is

    P̂(v) = Σ_j H_j s(j, v),   H_j = Σ_{i: j_i = j} w_i c_i b_i = Σ_l w_l c_l T_{l,j},

where T_{l,j} is the (exact, integer) sum of b over the rows of ε level l that reported
row j. With paper weights w_i = tanh²(ε_i/2)/S_τ this is (1/S_τ) Σ_i b_i tanh(ε_i/2) s(j_i, v).

Radius (ℓ∞, all v simultaneously, probability >= 1-β over data, devices and Φ; explicit
constants ours, following the proof of the paper's Theorem 4.1):
  * JL: sqrt(2 ln(4d/β) Σ w_i² c_i²) + sqrt(2 ln(4d/β)/m): Hoeffding for the randomization
    (each term w_i c_i b_i s ∈ ±w_i c_i) and for the JL bias (m i.i.d. terms in [-1, 1]),
    union bound over v and the two parts. It needs Φ's seed to be independent of the data.
  * Hadamard: sqrt(2 ln(2d/β) Σ w_i² c_i²) (exactly orthogonal columns: no bias term).
  Plus the absolute slack 2**-28 of :mod:`hdp_spark.core.ldp.mean`.
Rows with no item (⊥) report a fair sign and contribute 0 in expectation, so estimates are
frequencies relative to all rows. The released pmf clips each coordinate to [0, 1] (never
increases the ℓ∞ error); with ``fallback`` on and a radius >= 1 it is the uniform pmf.
The reports are already ε_i-LDP; nothing here adds noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hdp_spark.core.ldp.common import rr_factor, warn_large_eps
from hdp_spark.core.ldp.mean import RADIUS_SLACK, LdpLevel, level_weights, weights_bias
from hdp_spark.core.ldp.specs import LdpDistributionSpec
from hdp_spark.core.ldp.stats import LdpGroupStats, level_arrays

__all__ = ["LdpDistributionResult", "distribution_radius", "finalize_ldp_distribution"]


@dataclass(frozen=True, slots=True)
class LdpDistributionResult:
    """Local-DP distribution of one group (see :func:`hdp_spark.ldp.ldp_distribution`)."""

    estimate: tuple[float, ...]
    raw: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    radius: float
    m: int
    projection: str
    n: int
    skipped: int
    weights: str
    fallback: bool
    levels: tuple[LdpLevel, ...]
    bias_bound: float = 0.0


def distribution_radius(variance: float, d: int, m: int, projection: str, beta: float) -> float:
    """ℓ∞ radius for Σ w_i² c_i² = ``variance`` (before slack)."""
    if projection == "hadamard":
        return math.sqrt(2.0 * math.log(2.0 * d / beta) * variance)
    log_term = math.log(4.0 * d / beta)
    return math.sqrt(2.0 * log_term * variance) + math.sqrt(2.0 * log_term / m)


def finalize_ldp_distribution(
    spec: LdpDistributionSpec, stats: LdpGroupStats
) -> LdpDistributionResult:
    """Estimate, radius and metadata of one group's distribution."""
    oracle = spec.oracle
    d = oracle.d
    levels, counts = level_arrays(stats)
    weights = level_weights("jl", spec.weights, levels, counts)
    uniform = tuple(1.0 / d for _ in range(d))
    if not any(weights):
        return LdpDistributionResult(
            uniform, tuple(math.nan for _ in range(d)), tuple(0.0 for _ in range(d)),
            tuple(1.0 for _ in range(d)), math.inf, oracle.m, oracle.projection, stats.n,
            stats.skipped, spec.weights, True,
            tuple(LdpLevel(lv, c, 0.0) for lv, c in zip(levels, counts, strict=True)),
        )
    warn_large_eps(levels, counts)
    factor = np.array([w * rr_factor(lv) for lv, w in zip(levels, weights, strict=True)])
    position = np.searchsorted(np.asarray(levels, dtype=np.float64), stats.level)
    contrib = factor[position] * stats.totals()
    unique, inverse = np.unique(stats.index, return_inverse=True)
    h = np.zeros(unique.shape[0], dtype=np.float64)
    np.add.at(h, inverse, contrib)
    raw_arr = oracle.frequencies(h, unique)
    var = math.fsum(
        n * (w * rr_factor(lv)) ** 2 for w, lv, n in zip(weights, levels, counts, strict=True)
    )
    radius = distribution_radius(var, d, oracle.m, oracle.projection, spec.beta) + RADIUS_SLACK
    fallback = spec.fallback and radius >= 1.0
    raw = tuple(float(x) for x in raw_arr)
    estimate = uniform if fallback else tuple(min(max(x, 0.0), 1.0) for x in raw)
    # a report's true value is one category: each bin's indicator lies in [0, 1], so the
    # weighted frequency misses the table's by at most ||w - 1/n||₁/2 per bin, whatever the
    # data (hdp_spark.core.ldp.mean, "The table's own mean")
    bias = weights_bias(weights, counts)
    return LdpDistributionResult(
        estimate=estimate,
        raw=raw,
        ci_low=tuple(min(max(x - radius - bias, 0.0), 1.0) for x in raw),
        ci_high=tuple(max(min(x + radius + bias, 1.0), 0.0) for x in raw),
        radius=radius,
        m=oracle.m,
        projection=oracle.projection,
        n=stats.n,
        skipped=stats.skipped,
        weights=spec.weights,
        fallback=fallback,
        levels=tuple(
            LdpLevel(lv, c, w) for lv, c, w in zip(levels, counts, weights, strict=True)
        ),
        bias_bound=bias,
    )
