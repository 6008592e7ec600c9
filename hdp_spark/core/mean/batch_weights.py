"""Vectorized mean weights: many groups' ε histograms at once, the same numbers as
:func:`hdp_spark.core.mean.finalize.mean_weights` bit for bit.

Privacy-critical only through equality: the weights and the noise parameter η fix every
row's privacy loss w_l/η <= ε_l (argument in :mod:`hdp_spark.core.mean.weights`). This
module computes the same φ, τ, exact integer numerators and η as the scalar solvers, for
the methods whose weights are closed-form or a single prefix scan:

* ``adpm`` (solver S2 with c = 8): the scalar loop is a prefix scan over the ascending
  levels; the prefix sums are ``numpy.cumsum`` along each group's row of a padded
  (groups x levels) table, which adds the same floats in the same order (padding adds
  +0.0, which changes no sum), so every candidate τ is the same double;
* ``hpm-a``, ``uniform`` and ``proportional``: φ in closed form (``hpm-a`` through
  ``math.expm1`` on the distinct levels, the scalar function itself);
* ``hpm-cp``/``ce``/``wp``/``we`` and ``drop``: φ and τ from the scalar solver (for
  ``wp``/``we`` the better of two, as the scalar path chooses), called once per
  distinct ε histogram of the batch with the scalar path's arguments (the same floats);
  everything after φ is vectorized as for the others.

A group whose η the float quotients cannot settle (two levels whose float ratios φ/ε tie
but may differ exactly) is flagged ``scalar``: the caller computes that group with the
scalar path. The local-DP baselines go through the scalar path as a whole
(:func:`vector_method`).

Exact normalization (as :func:`~hdp_spark.core.mean.weights.normalize`): each φ = M·2**E
(M odd, from ``frexp``) exactly; with K the largest denominator exponent max(0, -E) of the
group, the numerators P_l = M_l·2**(E_l + K) are the scalar path's integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.mean.weights import best_solver_phi, drop_phi, solve_l1

__all__ = ["VECTOR_METHODS", "PhiTable", "adpm_fallback", "batch_phi", "padded", "vector_method"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

SOLVER_METHODS = frozenset({"hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "drop"})
"""Methods whose φ and τ come from the scalar solver of each distinct ε histogram of a
batch (:func:`~hdp_spark.core.mean.weights.solve_l1`,
:func:`~hdp_spark.core.mean.weights.best_solver_phi`,
:func:`~hdp_spark.core.mean.weights.drop_phi`, the same calls as the scalar path); the
exact normalization, η and the rest are this module's, for all groups at once."""

VECTOR_METHODS = frozenset({"adpm", "hpm-a", "uniform", "proportional"}) | SOLVER_METHODS
"""Methods whose weights this module computes for many groups at once."""

_ADPM_C = 8.0  # = finalize.ADPM_C (not imported: finalize imports nothing from here)


def vector_method(spec: MeanSpec) -> bool:
    """True when ``spec``'s weights are computed here (else the scalar path, per group).

    Privacy:
        None: a function of the public method name.
    """
    return spec.method in VECTOR_METHODS


@dataclass(frozen=True, slots=True)
class PhiTable:
    """The weights of G groups on a padded (G x L) table of their levels.

    Attributes:
        mask: real cells (False: padding after a group's last level).
        phi: φ per cell (0 on padding).
        tau: τ per group, as the scalar solver returns it.
        mant: odd integer M of φ = M·2**E per cell (0 where φ = 0).
        shift: E + K per cell (P = M << shift; 0 where φ = 0).
        eta_at: index of the level attaining η per group (-1: η = 0, no constrained level).
        min_at: index of the smallest φ > 0 at a finite ε per group (-1: none); its
            numerator is the smallest sensitivity that fixes the noise grid.
        eta_unit: η's level has φ = ε exactly. Then η = 2**K / Σ m·P and every level's
            delivered loss w_l/η = P_l/2**K is φ_l itself (exact: no rounding).
        scalar: groups to compute with the scalar path (η undecided by floats).
    """

    mask: BoolArray
    phi: FloatArray
    tau: FloatArray
    mant: IntArray
    shift: IntArray
    eta_at: IntArray
    min_at: IntArray
    eta_unit: BoolArray
    scalar: BoolArray


def padded(offsets: IntArray, values: npt.NDArray[np.generic], fill: float
           ) -> tuple[npt.NDArray[np.generic], BoolArray]:
    """``values`` (flat, segments given by ``offsets``) as a (G x L) table and its mask."""
    sizes = np.diff(offsets)
    width = max(int(sizes.max()) if sizes.size else 0, 1)  # >= 1: argmax needs a column
    mask = np.arange(width)[None, :] < sizes[:, None]
    out = np.full(mask.shape, fill, dtype=values.dtype)
    out[mask] = values
    return out, mask


def _solve_adpm(v: FloatArray, m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """φ and τ of :func:`~hdp_spark.core.mean.weights.solve_clip_level` with c = 8, per row.

    The scalar loop visits the levels in ascending order, skips ε <= 0 and empty levels,
    stops at ε = +inf and returns at the first level l with s1 > 0 and
    τ_l = (s2 + c)/s1 <= ε_l, where s1, s2 are the sums over the levels before l. Here
    s1, s2 before each level are exclusive prefix sums of the same terms (m·ε and
    (m·ε)·ε, +0.0 on skipped cells), the first qualifying l is an argmax over a mask.
    """
    rows, width = v.shape
    live = (v > 0) & (m > 0) & np.isfinite(v)
    t1 = np.where(live, m * v, 0.0)
    t2 = np.where(live, (m * v) * v, 0.0)
    s1 = np.cumsum(t1, axis=1)
    s2 = np.cumsum(t2, axis=1)
    zero = np.zeros((rows, 1))
    p1 = np.concatenate([zero, s1[:, :-1]], axis=1) if width else s1
    p2 = np.concatenate([zero, s2[:, :-1]], axis=1) if width else s2
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = (p2 + _ADPM_C) / p1
    hit = live & (p1 > 0) & (cand <= v)
    found = hit.any(axis=1)
    first = np.argmax(hit, axis=1)
    tau = np.full(rows, math.inf)
    tau[found] = cand[found, first[found]] if width else tau[found]
    public = (np.isinf(v) & (m > 0)).any(axis=1)
    total1 = s1[:, -1] if width else np.zeros(rows)
    total2 = s2[:, -1] if width else np.zeros(rows)
    capped_public = ~found & public & (total1 > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(capped_public, (total2 + _ADPM_C) / total1, tau)
    only_public = ~found & public & ~(total1 > 0)
    tau = np.where(only_public, math.nan, tau)
    # min(x, tau) returns x unless tau < x; max(x, 0.0) returns x unless 0.0 > x
    capped = np.where(tau[:, None] < v, tau[:, None], v)
    phi = np.where((found | capped_public)[:, None], capped, np.where(v < 0.0, 0.0, v))
    phi = np.where(only_public[:, None], np.where(np.isinf(v), 1.0, 0.0), phi)
    return phi, tau


def _agnostic(v: FloatArray) -> FloatArray:
    """φ(ε) = 1 - exp(-ε) as :func:`~hdp_spark.core.mean.weights.agnostic_phi`, evaluated
    by ``math.expm1`` once per distinct level."""
    uniq, inverse = np.unique(v, return_inverse=True)
    phi = np.array([1.0 if math.isinf(x) else (-math.expm1(-x) if x > 0 else 0.0)
                    for x in uniq.tolist()], dtype=np.float64)
    return phi[inverse].reshape(v.shape)


def _method_phi(method: str, v: FloatArray, m: FloatArray) -> tuple[FloatArray, FloatArray]:
    rows = v.shape[0]
    counted = m > 0
    public: BoolArray = np.asarray((np.isinf(v) & counted).any(axis=1))
    if method == "adpm":
        return _solve_adpm(v, m)
    if method == "hpm-a":
        return _agnostic(v), np.full(rows, math.nan)
    if method == "uniform":
        trivial: BoolArray = np.asarray(((v <= 0) & counted).any(axis=1))
        phi = np.where(trivial[:, None], 0.0, np.ones_like(v))
        has_positive = (counted & (v > 0)).any(axis=1)
        positive = np.where(counted & (v > 0), v, math.inf)
        low = positive.min(axis=1) if v.shape[1] else np.full(rows, math.inf)
        tau = np.where(~trivial & has_positive, low, math.nan)
        return phi, tau
    # proportional
    phi = np.where(public[:, None], np.where(np.isinf(v), 1.0, 0.0),
                   np.where(v < 0.0, 0.0, v))
    return phi, np.where(public, math.nan, math.inf)


def _best_of_two(v: list[float], m: list[int], lf: float) -> tuple[list[float], float]:
    phi, tau, _ = best_solver_phi(v, m, lf)
    return phi, tau


_SOLVERS = {"hpm-cp": solve_l1, "hpm-ce": solve_l1, "hpm-wp": _best_of_two,
            "hpm-we": _best_of_two, "drop": drop_phi}


def _solver_phi(method: str, offsets: IntArray, levels: FloatArray, counts: IntArray,
                mask: BoolArray, log_factor: float) -> tuple[FloatArray, FloatArray]:
    """φ (padded like ``mask``) and τ of every group from the scalar solver, called once per
    distinct ε histogram with the scalar path's arguments (plain lists, the same log
    factor), so the same floats."""
    solve = _SOLVERS[method]
    phi = np.zeros(mask.shape)
    tau = np.empty(offsets.shape[0] - 1)
    flat: list[float] = []
    done: dict[bytes, tuple[list[float], float]] = {}
    bounds = offsets.tolist()
    for g in range(len(bounds) - 1):
        lo, hi = bounds[g], bounds[g + 1]
        signature = levels[lo:hi].tobytes() + counts[lo:hi].tobytes()
        solved = done.get(signature)
        if solved is None:
            solved = done[signature] = solve(levels[lo:hi].tolist(), counts[lo:hi].tolist(),
                                             log_factor)
        flat.extend(solved[0])
        tau[g] = solved[1]
    phi[mask] = flat
    return phi, tau


def batch_phi(method: str, offsets: IntArray, levels: FloatArray, counts: IntArray,
              beta: float = 0.05) -> PhiTable:
    """φ, τ, exact numerators and η's level of every group of a batch (one method).

    Args:
        method: one of :data:`VECTOR_METHODS`.
        offsets: group g's cells are ``[offsets[g], offsets[g + 1])``.
        levels: ε level per cell, ascending within a group.
        counts: rows per cell.
        beta: the spec's β (the log factor ln(1/β) of ``hpm-cp`` and ``drop``).

    Privacy:
        Reads no value and draws no noise: a function of the public ε histograms only.
    """
    vp, mask = padded(offsets, levels, 0.0)
    mi, _ = padded(offsets, counts, 0)
    v: FloatArray = np.asarray(vp, dtype=np.float64)
    m: FloatArray = mi.astype(np.float64)  # counts < 2**53: as exact as Python's int·float
    if method in SOLVER_METHODS:
        phi, tau = _solver_phi(method, offsets, levels, counts, mask,
                               1.0 if method in ("hpm-ce", "hpm-we")
                               else math.log(1.0 / beta))
    else:
        phi, tau = _method_phi(method, v, m)
    phi = np.where(mask, phi, 0.0)
    # exact φ = M·2**E with M odd; denominator exponent k = max(0, -E); K = max_l k
    frac, exp = np.frexp(phi)
    whole = (frac * 2.0**53).astype(np.int64)
    low_bit = whole & -whole
    tz = np.where(whole > 0, np.frexp(low_bit.astype(np.float64))[1] - 1, 0)
    mant = whole >> tz
    e = exp.astype(np.int64) - 53 + tz
    positive = phi > 0
    k = np.where(positive, np.maximum(-e, 0), 0)
    top = k.max(axis=1) if k.shape[1] else np.zeros(k.shape[0], np.int64)
    shift = np.where(positive, e + top[:, None], 0)
    # η's level: the largest φ/ε over levels with φ > 0 and finite ε (ε > 0 there; the
    # scalar path raises on positive weight at ε = 0, so such groups go to it)
    finite = np.isfinite(v)
    eligible = positive & finite
    bad_zero = (eligible & (v <= 0)).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(eligible & (v > 0), phi / v, -1.0)
    best = ratio.max(axis=1) if ratio.shape[1] else np.full(ratio.shape[0], -1.0)
    ties = (ratio == best[:, None]) & eligible
    n_ties = ties.sum(axis=1)
    unit = np.where(ties, phi == v, True).all(axis=1)  # every tie has the exact ratio 1
    eta_at = np.where(n_ties > 0, np.argmax(ties, axis=1), -1)
    scalar = bad_zero | ((n_ties > 1) & ~unit)
    rows = np.arange(phi.shape[0])
    at = np.maximum(eta_at, 0)
    eta_unit = (n_ties > 0) & (phi[rows, at] == v[rows, at])
    min_at = np.where(eligible.any(axis=1),
                      np.argmin(np.where(eligible, phi, math.inf), axis=1), -1)
    return PhiTable(mask, phi, np.asarray(tau, np.float64), mant, shift,
                    eta_at.astype(np.int64), min_at.astype(np.int64), eta_unit, scalar)


_MARGIN = 1e-9
"""How far from 1/4 the float estimate of ADPM's worst-case MSE must be to settle the
fallback test without exact arithmetic (its relative error is below (L + 8)·2**-53)."""


def adpm_fallback(table: PhiTable, offsets: IntArray, levels: FloatArray, counts: IntArray
                  ) -> tuple[BoolArray, BoolArray]:
    """ADPM's fallback test ``||w||²/4 + 2η² > 1/4`` (ISIT paper, Algorithm 1) for every
    group, from floats: ``(fallback, settled)``.

    The exact test (:func:`~hdp_spark.core.mean.finalize.plan_mean`) rounds ``Σ m·P²/den²``
    and η once each from exact integers, then combines them in floats; here ``w = φ/Σ m·φ``
    and η = (φ/ε at η's level)/Σ m·φ are evaluated in floats. Both are within a relative
    (L + 8)·2**-53 of the real value, so where this estimate is more than
    :data:`_MARGIN` away from 1/4 (and L < 10**5) both give the same answer: ``settled``.
    Groups not settled (or with no weight) must be tested exactly by the caller.

    Privacy:
        None by itself: a function of the public ε histograms; a settled group's decision
        equals the exact test's.
    """
    v, _ = padded(offsets, levels, 0.0)
    mi, _ = padded(offsets, counts, 0)
    m = mi.astype(np.float64)
    phi = table.phi
    rows = np.arange(phi.shape[0])
    at = np.maximum(table.eta_at, 0)
    with np.errstate(all="ignore"):
        total = (m * phi).sum(axis=1)
        w = phi / total[:, None]
        l2 = (m * w * w).sum(axis=1)
        eta = np.where(table.eta_at >= 0, phi[rows, at] / np.asarray(v)[rows, at] / total,
                       0.0)
        worst = l2 / 4 + 2 * eta**2
    settled = (np.isfinite(worst) & (total > 0) & (np.abs(worst - 0.25) > _MARGIN)
               & (phi.shape[1] < 100_000))
    return np.asarray(worst > 0.25) & settled, settled
