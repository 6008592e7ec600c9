"""Finalize step of the heterogeneous-DP mean: per-level statistics -> released value.

HPM (Algorithm 2, App. A of Chaudhuri & Courtade, *Private Estimation When Data and
Privacy Demands Are Correlated*, FORC 2025) and ADPM (Algorithm 1 of Chaudhuri & Courtade,
*Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free*, ISIT 2023).

Privacy-critical: row i's ε_i-DP guarantee for the released mean depends on this module
(the unit-scale statistic, the noise scale and its single mapping back to data units).
Argument in short: one row moves the unit-scale statistic by at most its weight w_l, so
Laplace of scale η = max_l w_l/ε_l gives it loss w_l/η <= ε_l (FORC paper, Lemma 1; ISIT
paper §III-A); details below.

Sensitivity argument (replace-one neighbours, ε public):
  Values are clamped to the public [lower, upper] and encoded in unit scale u ∈ [0, 1]
  (:mod:`hdp_spark.core.encoding`). The statistic is a = Σ_l w_l · U_l, where U_l is the
  sum of u over the rows of level l and w_l the per-row weight, a function of the ε
  histogram only. Replacing one row of level l moves a by at most w_l (one unit of range).
  Laplace noise of scale η = max_l{w_l / ε_l : w_l > 0, ε_l finite}, drawn by
  :func:`~hdp_spark.core.noise.laplace_mechanism`, therefore gives every row of level l a
  privacy loss of at most w_l / η <= ε_l (the "effective ε", min(ε_l, τ) for capped rules).
  The estimate is mapped back as lower + (upper - lower) · (a + noise): the noise scale in
  original units is (upper - lower) · η, applied once. Scaling twice (noise (upper - lower)·η
  in unit scale, then mapping back) would give loss ε_l/(upper - lower): a breach whenever
  the range is shorter than 1.
  The ADPM fallback, the choice of W branch and every weight depend on ε only.

Released interval: estimate ± (the noise's (1 - β) half-width + ``bias_bound``), cut to
[lower, upper], with ``bias_bound`` = (upper - lower)·||w - 1/n||₁/2, the worst-case
reweighting error |Σ_i w_i x_i - mean| (proof: :mod:`hdp_spark.core.reweighting`). It holds
the group's own mean with probability >= 1 - β on every data set in range; both are
post-processing of the noisy statistic and of public facts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.keys import context_key
from hdp_spark.core.mean.auto import AUTO, MEAN_CANDIDATES, one_group_predictions
from hdp_spark.core.mean.ldp_baseline import (
    LDP_BASE_METHOD,
    ldp_noise_figures,
    ldp_remainder,
)
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.mean.weights import (
    Weights,
    agnostic_phi,
    best_of_solvers,
    drop_phi,
    normalize,
    proportional_phi,
    solve_clip_level,
    solve_l1,
    uniform_weights,
)
from hdp_spark.core.noise import (
    ReleaseKey,
    encode_context_head,
    encode_context_tail,
    laplace_mechanism,
)
from hdp_spark.core.records import new_record, slot_setters
from hdp_spark.core.reweighting import FALLBACK_BOUND, reweighting_bound, widened
from hdp_spark.core.stats import GroupStats

__all__ = [
    "ADPM_C",
    "LevelPrivacy",
    "MeanPlan",
    "MeanResult",
    "finalize_mean",
    "level_privacy",
    "mean_weights",
    "plan_mean",
    "released_figures",
    "released_figures_arrays",
    "resolve_mean",
    "with_method",
]

FloatArray = npt.NDArray[np.float64]

ADPM_C = 8.0
"""Objective constant of ADPM (ISIT paper, Algorithm 1):
||w||²/4 + 2||w/ε||∞² = (||w||² + 8||w/ε||∞²)/4."""


@dataclass(frozen=True, slots=True)
class LevelPrivacy:
    """What one ε level got in a release.

    Attributes:
        eps: the level (the demand, after capping or grid rounding).
        n: rows at this level.
        weight: per-row weight.
        eps_effective: the privacy loss bound actually delivered, weight / η <= eps.
    """

    eps: float
    n: int
    weight: float
    eps_effective: float


@dataclass(frozen=True, slots=True)
class MeanResult:
    """Released mean of one group. Field meanings are documented in ``hdp_mean``."""

    estimate: float
    noise_scale: float
    ci_low: float
    ci_high: float
    bias_bound: float
    n: int
    tau: float
    method: str
    fallback: bool
    levels: tuple[LevelPrivacy, ...]


def mean_weights(spec: MeanSpec, v: list[float], m: list[int]) -> Weights:
    """Per-level weights of ``spec.method`` for the ε histogram (v, m).

    The local-DP baselines (``ldp-*``) use the weights of their HPM method; ``auto`` those
    of the group's choice (:func:`resolve_mean`).
    """
    spec = resolve_mean(spec, v, m)
    method = LDP_BASE_METHOD.get(spec.method, spec.method)
    if method == "adpm":
        phi, tau = solve_clip_level(v, m, ADPM_C)
        return normalize(v, m, phi, tau)
    log_pac = math.log(1.0 / spec.beta)
    if method == "hpm-a":
        phi, tau = agnostic_phi(v), math.nan
    elif method in ("hpm-cp", "hpm-ce"):
        phi, tau = solve_l1(v, m, log_pac if method == "hpm-cp" else 1.0)
    elif method in ("hpm-wp", "hpm-we"):
        return best_of_solvers(v, m, log_pac if method == "hpm-wp" else 1.0)
    elif method == "uniform":
        return uniform_weights(v, m)
    elif method == "proportional":
        phi = proportional_phi(v, m)
        tau = math.nan if any(math.isinf(x) for x, c in zip(v, m, strict=True) if c) else math.inf
    else:  # drop
        phi, tau = drop_phi(v, m, log_pac)
    return normalize(v, m, phi, tau)


def level_privacy(
    v: Sequence[float], m: Sequence[int], nums: Sequence[int], den: int, eta: Fraction
) -> tuple[LevelPrivacy, ...]:
    """Each level's weight and delivered loss bound, for per-row weights ``nums[l] / den``
    and the noise parameter ``eta`` (0 when only public rows carry weight).

    eps_effective = w_l / η = (P_l / den) / (a / b) = P_l·b / (den·a): one correctly rounded
    integer division, so it never rounds above a level's ε when w_l / η <= ε exactly.
    """
    if not eta:
        effective = [math.inf if p else 0.0 for p in nums]
    else:
        scale, divisor = eta.denominator, den * eta.numerator
        effective = [(p * scale) / divisor if p else 0.0 for p in nums]
    return tuple(map(_level, v, m, [p / den for p in nums], effective))


_SET_EPS, _SET_N, _SET_WEIGHT, _SET_EPS_EFFECTIVE = slot_setters(LevelPrivacy)


def _level(eps: float, n: int, weight: float, eps_effective: float) -> LevelPrivacy:
    """``LevelPrivacy(eps, n, weight, eps_effective)``, its slots set directly (a release
    builds one per group and level; see :mod:`hdp_spark.core.records`)."""
    out: LevelPrivacy = new_record(LevelPrivacy)
    _SET_EPS(out, eps)
    _SET_N(out, n)
    _SET_WEIGHT(out, weight)
    _SET_EPS_EFFECTIVE(out, eps_effective)
    return out


@functools.lru_cache(maxsize=1024, typed=True)  # typed: the bound 1 and 1.0 encode apart
def _context_head(label: str, method: str, column: str, lower: float, upper: float) -> bytes:
    return encode_context_head(("mean", label, method, column, lower, upper), 10)


def finalize_mean(
    spec: MeanSpec,
    stats: GroupStats,
    value_index: int,
    key: ReleaseKey,
    group: tuple[object, ...],
    label: str,
) -> MeanResult:
    """Weights, estimate, noise and metadata of one group.

    Args:
        spec: the aggregator.
        stats: the group's level table.
        value_index: which encoded sum in ``stats`` belongs to ``spec``.
        key: the release key (the noise is a PRF of key, group and exact statistics).
        group: the group key (empty tuple for a global release).
        label: the aggregator's position/name within the release (domain separation).
    """
    lower, upper = float(spec.lower), float(spec.upper)
    rows = stats.rows
    v = [r.level for r in rows]
    m = [r.count for r in rows]
    spec = resolve_mean(spec, v, m)  # "auto": the chosen method's release from here on
    plan = plan_mean(spec, v, m)
    weights = plan.weights
    if weights is None:
        return MeanResult((lower + upper) / 2, 0.0, lower, upper,
                          (upper - lower) * FALLBACK_BOUND, plan.n, plan.tau, spec.method,
                          True, plan.levels)
    nums, den = weights.numerators, weights.denominator
    n, levels = plan.n, plan.levels
    bias_unit = reweighting_bound(m, nums, den)
    totals = [r.totals[value_index] for r in rows]
    # exact statistic Σ_l w_l·U_l in unit scale: (Σ P_l·q_l) / (den·2^31)
    statistic = Fraction(sum(map(operator.mul, nums, totals)), den * FIXED_ONE)
    # Bind the noise to what the output is a function of: the public ε histogram and the
    # exact statistic, not the raw per-level sums. Rows of weight 0 (ε = 0, dropped or
    # public-only-excluded levels) then cannot change the noise, so they cannot change the
    # output (a row with ε = 0 must not influence it at all); any change of the statistic
    # still gets unrelated noise.
    histogram = _histogram_struct(len(v)).pack(*v, *m)
    # = encode_context(("mean", label, method, column, lower, upper, key, histogram,
    #   statistic, value_index)); the head is shared by every group of the spec
    head = _context_head(label, spec.method, spec.column, spec.lower, spec.upper)
    context = encode_context_tail(head, (context_key(group), histogram, statistic, value_index))
    draw = laplace_mechanism(
        statistic,
        weights.eta,
        plan.min_sensitivity,
        key.stream(context),
    )
    value, scale = draw.value, draw.scale
    unit = value.numerator / value.denominator
    if spec.method in LDP_BASE_METHOD:
        # the local-DP baseline: the rest of Σ_i w_i Z_i, independent of the exact draw
        # (post-processing; argument in hdp_spark.core.mean.ldp_baseline)
        per_row = [p / den for p in nums]
        unit += ldp_remainder(v, m, per_row, key, context)
        sd, half_unit = ldp_noise_figures(v, m, per_row, scale, draw.granularity, spec.beta)
    else:
        sd, half_unit = scale.numerator / scale.denominator, draw.half_width(spec.beta)
    estimate, noise_scale, ci_low, ci_high, bias_bound = released_figures(
        lower, upper, unit, sd, half_unit, bias_unit, spec.clips)
    return MeanResult(
        estimate,
        noise_scale,
        ci_low,
        ci_high,
        bias_bound,
        n,
        weights.tau,
        spec.method,
        False,  # fallback
        levels,
    )


def released_figures(lower: float, upper: float, unit: float, noise_unit: float,
                     half_unit: float, bias_unit: float, clips: bool
                     ) -> tuple[float, float, float, float, float]:
    """(estimate, noise scale, ci_low, ci_high, bias_bound) in value units from the noisy
    unit-scale statistic, its noise scale, its noise interval's half-width and the
    reweighting bound ||w - 1/n||₁/2 (the scalar and the batch finalize both call this:
    the same floats).

    The interval is estimate ± (noise half-width + bias_bound), cut to [lower, upper]: it
    holds the group's plain mean with probability >= 1 - β on every data set in range
    (proof in :mod:`hdp_spark.core.reweighting`).

    Privacy:
        Post-processing of the noisy statistic and public figures (bounds, β, weights).
    """
    return _figures(lower, upper, unit, noise_unit, half_unit, bias_unit, clips, max, min)


def released_figures_arrays(lower: float, upper: float, unit: FloatArray,
                            noise_unit: FloatArray, half_unit: FloatArray,
                            bias_unit: FloatArray, clips: bool
                            ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray,
                                       FloatArray]:
    """:func:`released_figures` of many groups at once, the same floats: the same
    operations (one body, :func:`_figures`), IEEE's on arrays, with Python's ``max(a, b)``
    / ``min(a, b)`` (``a`` unless ``b`` is strictly larger / smaller) as ``where`` (tested
    equal).

    Privacy:
        Post-processing of the noisy statistics and public figures (bounds, β, weights).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN as Python's floats
        return _figures(lower, upper, unit, noise_unit, half_unit, bias_unit, clips,
                        _py_max, _py_min)


def _figures(lower: float, upper: float, unit: Any, noise_unit: Any, half_unit: Any,
             bias_unit: Any, clips: bool, hi_of: Callable[[Any, Any], Any],
             lo_of: Callable[[Any, Any], Any]) -> tuple[Any, Any, Any, Any, Any]:
    """The released figures' arithmetic, for floats (``max``, ``min``) or arrays."""
    span = upper - lower
    estimate = lower + span * unit
    bias = span * bias_unit
    # noise half-width + worst-case reweighting error, outward by a rounding margin
    reach = widened(span * half_unit + bias, lower, upper)
    lo, hi = estimate - reach, estimate + reach
    if clips:
        estimate = lo_of(hi_of(estimate, lower), upper)
    lo, hi = hi_of(lo, lower), lo_of(hi, upper)
    return estimate, span * noise_unit, lo_of(lo, estimate), hi_of(hi, estimate), bias


def _py_max(a: FloatArray, b: FloatArray | float) -> FloatArray:
    return np.where(b > a, b, a)  # Python's max(a, b)


def _py_min(a: FloatArray, b: FloatArray | float) -> FloatArray:
    return np.where(b < a, b, a)  # Python's min(a, b)


def resolve_mean(spec: MeanSpec, v: list[float], m: list[int]) -> MeanSpec:
    """``spec`` itself, or for ``method="auto"`` the spec of the group's chosen method
    (:func:`~hdp_spark.core.mean.auto.choose_mean` on this one group's ε histogram: the
    first smallest prediction).

    Privacy:
        A function of the public ε histogram (v, m) and the spec: the release that follows
        is the chosen method's, so each row's guarantee is that method's (argument in
        :mod:`hdp_spark.core.mean.auto`).
    """
    if spec.method != AUTO:
        return spec
    pred = one_group_predictions(tuple(v), tuple(m), spec.beta)
    return with_method(spec, MEAN_CANDIDATES[pred.index(min(pred))])  # first smallest


@functools.lru_cache(maxsize=256)
def with_method(spec: MeanSpec, method: str) -> MeanSpec:
    """``spec`` with ``method`` in place of ``"auto"`` (cached: one per spec and method)."""
    return dataclasses.replace(spec, method=method)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=64)
def _histogram_struct(width: int) -> struct.Struct:
    """Big-endian layout of an ε histogram of ``width`` levels: the levels, then the counts."""
    return struct.Struct(f">{width}d{width}q")


@dataclass(frozen=True, slots=True)
class MeanPlan:
    """Everything of one group's mean release that is fixed before any noise is drawn.

    Attributes:
        n: rows in the group.
        tau: clip level of capped rules (+inf = nobody clipped, NaN = not a capped rule).
        levels: per ε level: eps, n, per-row weight, eps_effective (all 0 on a fallback).
        weights: the exact weights, or None when the output is the data-independent
            midpoint (no rows, no row may carry weight, or the ADPM fallback).
        min_sensitivity: smallest positive weight of a private level (fixes the grid).
    """

    n: int
    tau: float
    levels: tuple[LevelPrivacy, ...]
    weights: Weights | None
    min_sensitivity: Fraction

    @property
    def fallback(self) -> bool:
        """True when the release outputs the data-independent midpoint."""
        return self.weights is None


def plan_mean(spec: MeanSpec, v: list[float], m: list[int]) -> MeanPlan:
    """Weights, fallback and per-level privacy of one group, from its ε histogram alone.

    Args:
        spec: the aggregator.
        v: the group's ε levels (ascending).
        m: rows per level.

    Privacy:
        Reads no value and draws no noise: a function of the public ε histogram (v, m) and
        the spec. :func:`finalize_mean` releases exactly this plan's weights and noise.
    """
    spec = resolve_mean(spec, v, m)
    n = sum(m)
    if not n:
        return MeanPlan(n, math.nan, (), None, Fraction(1))
    weights = mean_weights(spec, v, m)
    if weights.trivial:
        return _fallback(n, v, m, math.nan)
    nums, den = weights.numerators, weights.denominator
    if spec.method == "adpm":
        l2 = sum(map(operator.mul, m, [p * p for p in nums])) / (den * den)
        eta_f = weights.eta.numerator / weights.eta.denominator  # = float(eta)
        worst_mse = l2 / 4 + 2 * eta_f**2
        if worst_mse > 0.25:
            # Data-independent fallback (ISIT paper, Alg. 1): the midpoint beats the affine rule.
            return _fallback(n, v, m, weights.tau)
    isfinite = math.isfinite
    constrained = [p for p, vl in zip(nums, v, strict=True) if p > 0 and isfinite(vl)]
    return MeanPlan(
        n, weights.tau, level_privacy(v, m, nums, den, weights.eta), weights,
        Fraction(min(constrained), den) if constrained else Fraction(1),
    )


def _fallback(n: int, v: list[float], m: list[int], tau: float) -> MeanPlan:
    """The plan of the data-independent midpoint output (no row influences it: weights 0)."""
    zero = tuple([_level(vl, ml, 0.0, 0.0) for vl, ml in zip(v, m, strict=True)])
    return MeanPlan(n, tau, zero, None, Fraction(1))
