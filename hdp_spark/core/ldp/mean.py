"""Driver finalize of the local-DP means: level table -> estimate and (1-β) interval.

Implements the server side of Algorithms 1-3 of Aliakbarpour, Fallah, Roy & Stevens,
*High-Probability Bounds For Heterogeneous Local Differential Privacy* (§2.1, §2.2, §3.1).
Not privacy-critical: it only post-processes reports that are already ε_i-LDP.

The reports are already ε_i-LDP (they were randomized on the devices), so nothing here adds
noise: the weights depend on the public ε levels only, and everything is post-processing.

Estimators (w_l = f(ε_l) / Σ_l n_l f(ε_l), f the paper's weight of each algorithm, see
:func:`~hdp_spark.core.ldp.common.weight_phi`):
  * Laplace (Alg. 1): θ̂ = Σ_i w_i Y_i with reports Y_i = x_i + Lap(2/ε_i) in the unit scale.
  * RR (Alg. 2): θ̂ = Σ_i w_i c_i Y_i with Y_i ∈ {±1} and c_i = coth(ε_i/2).
  * Duchi (Alg. 3): θ̂ = Σ_i w_i Y_i with Y_i on the sphere of radius B_i = c_i r A_d
    (the unbiased radius; Algorithm 4 of the paper prints twice it).

Radii, valid for ANY weights summing to 1 and any ε > 0. The paper's Theorems 2.1, 2.2 and
3.1 hide universal constants; these explicit-constant versions are ours, from the same
concentration steps as its proofs (Appendix B):
  * Laplace: |θ̂ - θ| <= t1 + t2 with P(|Σw(X-θ)| >= t1) <= 2 exp(-t1²/(2 Σw²)) (Hoeffding,
    range 2) and Σ w Z ∈ subE(ν² = 16 Σ w²/ε², α = 4 max w/ε) (eq. 26-27), so
    P(|Σ w Z| >= t2) <= 2 exp(-½ min(t2²/ν², t2/α)). We split β = β1 + β2 and take the
    best of a grid of splits, and of the root of the paper's eq. (29) (split t/2 + t/2);
    both are rigorous. The exact sampler's discrete Laplace of scale at most
    2/ε + 2**-29 (:func:`~hdp_spark.core.noise.vector.laplace_unit`) is MGF-dominated by a
    continuous Laplace of that scale, so ε_l is replaced by ε_l / (1 + ε_l 2**-29) and the
    Hoeffding range by 2 (1 + 2**-30).
  * RR: Hoeffding, t = sqrt(2 ln(2/β) Σ w_i² c_i²) (= sqrt(2 ln(2/β)/S_τ) with paper weights).
  * Duchi: Pinelis' Hoeffding inequality in Hilbert space, ‖w_i (Y_i - θ)‖ <= w_i (B_i + r):
    ‖θ̂ - θ‖ <= sqrt(2 ln(2/β) Σ w_i² (B_i + r)²). The same radius bounds every coordinate.
Each radius also gets an absolute slack of 2**-28 (unit scale; r √d for vectors) that
covers the fixed-point encoding (<= 2**-31 per row) and the realized probabilities of the
exact samplers (relative bias <= 2**-38). Reports of our Laplace randomizer are clipped
at 64 noise scales; that event adds at most n e**-63.99 to the failure probability.

The table's own mean (issue 48). The radii above hold, with probability >= 1 - β, the
population mean θ when the values are i.i.d.; for a FIXED table they hold the weighted mean
Σ_i w_i·x_i (the randomizers' noise alone: the Laplace radius' noise term t2 at β - β1 <= β
and eq. (29)'s half t/2 each bound |Σ w_i Z_i| w.p. >= 1 - β; RR's and Duchi's Hoeffding
bounds hold for any fixed x_i, since E[c_i Y_i] = x_i with range 2 c_i). The user asks for
the plain mean x̄ of the group's reports' true values, which Σ w_i x_i misses by the
reweighting error, at most Δ·||w - 1/n||₁/2 for every table (proof in
:mod:`hdp_spark.core.reweighting`; Δ = 2 in the unit scale [-1, 1], n the usable reports,
weights fixed by the public ε histogram). The scalar mean publishes it as ``bias_bound``
(value units) and its ``ci_low``/``ci_high`` are raw ± (radius + bias_bound) cut to the
domain, which hold x̄ w.p. >= 1 - β on every table and still θ under the i.i.d. model
(a wider interval). ``radius`` stays the randomizers' part. With ``weights="uniform"`` the
bound is 0.

Trivial-estimator fallback (ours): when the radius reaches the domain radius (1 in the
unit scale, r for the ball) and ``fallback`` is on, the released value is the domain's
centre, whose error never exceeds the domain radius. The decision depends on ε only.
Otherwise the released value is the raw estimate projected onto the domain (projection
onto a convex set containing θ never increases the error). The raw, unprojected estimate
is always returned too (it is the unbiased one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hdp_spark.core.ldp.common import (
    FRACTION_BITS,
    LdpMechanism,
    LdpWeights,
    duchi_scale,
    rr_factor,
    warn_large_eps,
    weight_phi,
)
from hdp_spark.core.ldp.specs import LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.core.ldp.stats import LdpGroupStats, level_arrays, totals_by_index

__all__ = [
    "RADIUS_SLACK",
    "LdpLevel",
    "LdpMeanResult",
    "LdpVectorResult",
    "finalize_ldp_mean",
    "finalize_ldp_vector",
    "laplace_radius",
    "laplace_radius_eq29",
    "level_weights",
    "weights_bias",
]

RADIUS_SLACK = 2.0**-28
"""Absolute slack added to every radius (unit scale), see the module docstring."""

_UNIT = 2.0**-FRACTION_BITS
_GRID_INFLATION = 2.0**-29
_B_INFLATION = 1.0 + 2.0**-36


@dataclass(frozen=True, slots=True)
class LdpLevel:
    """One ε level of a local-DP aggregate.

    Attributes:
        eps: the level's ε (the reports' own ε, never rounded).
        n: rows with a usable report at this level.
        weight: per-row weight w_l (Σ_l n_l w_l = 1).
    """

    eps: float
    n: int
    weight: float


@dataclass(frozen=True, slots=True)
class LdpMeanResult:
    """Scalar local-DP mean of one group (fields documented in :func:`hdp_spark.ldp.ldp_mean`)."""

    estimate: float
    raw: float
    ci_low: float
    ci_high: float
    radius: float
    n: int
    skipped: int
    mechanism: str
    weights: str
    fallback: bool
    levels: tuple[LdpLevel, ...]
    bias_bound: float = 0.0


@dataclass(frozen=True, slots=True)
class LdpVectorResult:
    """Vector local-DP mean of one group (see :func:`hdp_spark.ldp.ldp_mean_vector`)."""

    estimate: tuple[float, ...]
    raw: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    radius: float
    n: int
    skipped: int
    mechanism: str
    weights: str
    fallback: bool
    levels: tuple[LdpLevel, ...]
    bias_bound: float = 0.0


def level_weights(
    mechanism: LdpMechanism, rule: LdpWeights, levels: Sequence[float], counts: Sequence[int]
) -> list[float]:
    """Per-row weight of each level, w_l = f(ε_l) / Σ_j n_j f(ε_j) (all zero if Σ = 0)."""
    phi = [weight_phi(mechanism, rule, lv) for lv in levels]
    total = math.fsum(c * p for c, p in zip(counts, phi, strict=True))
    if not total > 0:
        return [0.0] * len(phi)
    return [p / total for p in phi]


def _subexp_tail(nu2: float, alpha: float, log_term: float) -> float:
    """Smallest t with ½ min(t²/ν², t/α) >= log_term."""
    return max(math.sqrt(2.0 * nu2 * log_term), 2.0 * alpha * log_term)


def laplace_radius_eq29(
    weights: Sequence[float], eps: Sequence[float], counts: Sequence[int], beta: float
) -> float:
    """Root t of the paper's eq. (29) right-hand side = β (continuous Lap(2/ε), unit scale)."""
    a = math.fsum(c * w * w for w, c in zip(weights, counts, strict=True))
    v = math.fsum(c * w * w / (e * e) for w, e, c in zip(weights, eps, counts, strict=True))
    cmax = max((w / e for w, e, c in zip(weights, eps, counts, strict=True) if c), default=0.0)

    def rhs(t: float) -> float:
        first = 2.0 * math.exp(-t * t / (8.0 * a)) if a > 0 else 0.0
        if v > 0 and cmax > 0:
            second = 2.0 * math.exp(-min(t * t / (128.0 * v), t / (16.0 * cmax)))
        else:
            second = 0.0
        return first + second

    lo, hi = 0.0, 1.0
    while rhs(hi) > beta:
        hi *= 2.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if rhs(mid) > beta:
            lo = mid
        else:
            hi = mid
    return hi


def laplace_radius(
    weights: Sequence[float], eps: Sequence[float], counts: Sequence[int], beta: float
) -> float:
    """Rigorous (1-β) radius of the Laplace estimator in the unit scale (before slack)."""
    eff = [e / (1.0 + e * _GRID_INFLATION) for e in eps]
    a = math.fsum(c * w * w for w, c in zip(weights, counts, strict=True))
    v = math.fsum(c * w * w / (e * e) for w, e, c in zip(weights, eff, counts, strict=True))
    cmax = max((w / e for w, e, c in zip(weights, eff, counts, strict=True) if c), default=0.0)
    hoeffding = 1.0 + 2.0**-30
    best = math.inf
    for k in range(1, 100):
        b1 = beta * k / 100.0
        t1 = hoeffding * math.sqrt(2.0 * a * math.log(2.0 / b1))
        t2 = _subexp_tail(16.0 * v, 4.0 * cmax, math.log(2.0 / (beta - b1)))
        best = min(best, t1 + t2)
    spec = laplace_radius_eq29(weights, eff, counts, beta) * hoeffding
    return min(best, spec)


def _trivial_levels(levels: list[float], counts: list[int]) -> tuple[LdpLevel, ...]:
    return tuple(LdpLevel(lv, c, 0.0) for lv, c in zip(levels, counts, strict=True))


def finalize_ldp_mean(spec: LdpMeanSpec, stats: LdpGroupStats) -> LdpMeanResult:
    """Estimate, interval and metadata of one group's scalar local-DP mean."""
    lower, upper = float(spec.lower), float(spec.upper)
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    levels, counts = level_arrays(stats)
    weights = level_weights(spec.mechanism, spec.weights, levels, counts)
    if not any(weights):
        return LdpMeanResult(
            mid, math.nan, lower, upper, math.inf, stats.n, stats.skipped, spec.mechanism,
            spec.weights, True, _trivial_levels(levels, counts),
        )
    warn_large_eps(levels, counts)
    totals = totals_by_index(stats, 1)
    if spec.mechanism == "laplace":
        raw_unit = math.fsum(w * totals[lv][0] for w, lv in zip(weights, levels, strict=True))
        raw_unit *= _UNIT
        radius_unit = laplace_radius(weights, levels, counts, spec.beta)
    else:
        cs = [rr_factor(lv) for lv in levels]
        raw_unit = math.fsum(
            w * c * totals[lv][0] for w, c, lv in zip(weights, cs, levels, strict=True)
        )
        var = math.fsum(n * (w * c) ** 2 for w, c, n in zip(weights, cs, counts, strict=True))
        radius_unit = math.sqrt(2.0 * math.log(2.0 / spec.beta) * var)
    radius_unit += RADIUS_SLACK
    raw = mid + half * raw_unit
    radius = half * radius_unit
    fallback = spec.fallback and radius_unit >= 1.0
    estimate = mid if fallback else min(max(raw, lower), upper)
    bias = (upper - lower) * weights_bias(weights, counts)
    ci_low = min(max(raw - radius - bias, lower), upper)
    ci_high = max(min(raw + radius + bias, upper), lower)
    return LdpMeanResult(
        estimate=estimate,
        raw=raw,
        ci_low=ci_low,
        ci_high=ci_high,
        radius=radius,
        n=stats.n,
        skipped=stats.skipped,
        mechanism=spec.mechanism,
        weights=spec.weights,
        fallback=fallback,
        levels=tuple(
            LdpLevel(lv, c, w) for lv, c, w in zip(levels, counts, weights, strict=True)
        ),
        bias_bound=bias,
    )


def weights_bias(weights: Sequence[float], counts: Sequence[int]) -> float:
    """||w - 1/n||₁/2 for per-report weights ``weights[l]`` of the ``counts[l]`` reports of
    each level (n = Σ counts > 0): the reweighting error's bound over a range of length 1
    (module docstring, "The table's own mean"), plus 2^-40 for the float sums' rounding.

    Privacy:
        A function of the public ε histogram only.
    """
    n = sum(counts)
    tv = math.fsum(c * abs(w * n - 1.0) for w, c in zip(weights, counts, strict=True))
    return tv / (2.0 * n) + 2.0**-40 if tv > 0 else 0.0


def finalize_ldp_vector(spec: LdpVectorMeanSpec, stats: LdpGroupStats) -> LdpVectorResult:
    """Estimate, confidence ball and metadata of one group's Duchi vector mean."""
    d, r = spec.d, float(spec.radius)
    levels, counts = level_arrays(stats)
    weights = level_weights("duchi", spec.weights, levels, counts)
    zeros = tuple(0.0 for _ in range(d))
    if not any(weights):
        nan = tuple(math.nan for _ in range(d))
        return LdpVectorResult(
            zeros, nan, tuple(-r for _ in range(d)), tuple(r for _ in range(d)), math.inf,
            stats.n, stats.skipped, "duchi", spec.weights, True,
            _trivial_levels(levels, counts),
        )
    warn_large_eps(levels, counts)
    totals = totals_by_index(stats, d)
    raw = tuple(
        math.fsum(w * totals[lv][k] for w, lv in zip(weights, levels, strict=True)) * _UNIT * r
        for k in range(d)
    )
    scales = [duchi_scale(lv, r, d) * _B_INFLATION for lv in levels]
    var = math.fsum(n * (w * (b + r)) ** 2 for w, b, n in zip(weights, scales, counts, strict=True))
    radius = math.sqrt(2.0 * math.log(2.0 / spec.beta) * var) + RADIUS_SLACK * r * math.sqrt(d)
    fallback = spec.fallback and radius >= r
    norm = math.sqrt(math.fsum(x * x for x in raw))
    if fallback:
        estimate = zeros
    elif norm > r:
        estimate = tuple(x * (r / norm) for x in raw)
    else:
        estimate = raw
    # every coordinate of a report's true value lies in [-r, r] (the ball is inside the
    # box): the weighted mean misses the table's by at most 2r·||w - 1/n||₁/2 per coordinate
    # (module docstring, "The table's own mean"), whatever the data
    bias = 2.0 * r * weights_bias(weights, counts)
    return LdpVectorResult(
        estimate=estimate,
        raw=raw,
        ci_low=tuple(min(max(x - radius - bias, -r), r) for x in raw),
        ci_high=tuple(max(min(x + radius + bias, r), -r) for x in raw),
        radius=radius,
        n=stats.n,
        skipped=stats.skipped,
        mechanism="duchi",
        weights=spec.weights,
        fallback=fallback,
        levels=tuple(
            LdpLevel(lv, c, w) for lv, c, w in zip(levels, counts, weights, strict=True)
        ),
        bias_bound=bias,
    )
