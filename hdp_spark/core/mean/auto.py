"""``method="auto"``: per group, the method with the least predicted error.

Predicted error (ours; every figure a function of the public ε histogram and the spec):
the worst case, over every data set in the public range, of the mean squared error of the
release against the group's own mean (or a bin's frequency). For an affine release
Σ_i w_i·x_i + Laplace(b) with Σ w_i = 1 and target (1/n)·Σ x_i, the error is
Σ_i (w_i - 1/n)·x_i + noise, so for values in a range of length Δ

    worst MSE = (Δ·||w - 1/n||₁ / 2)² + 2·b²,

the first term attained by the data set that puts every over-weighted row at one end of the
range and every under-weighted row at the other (the correlated setting of Chaudhuri &
Courtade, *Private Estimation When Data and Privacy Demands Are Correlated*, FORC 2025, §1
and eq. (6), with the constants of an MSE instead of the paper's PAC rates), the second the
Laplace variance. Mean: Δ = upper - lower, b = Δ·η. Histogram: per bin, Δ = 1 and the HPF
scale b = 2η, so the bound is (||w - 1/n||₁/2)² + 8η², and ||w - 1/n||₁/2 is the released
``bias_bound``. A release whose output is data-independent (no weight anywhere, or the ADPM
fallback) predicts (Δ/2)². The variance term is taken at this worst case on purpose: a
sharper figure needs an assumption on how values and ε relate (under a random assignment of
values to rows, the weakly-correlated setting of the same paper, ADPM's objective
||w||²/4 + 2η² of *Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free*,
ISIT 2023, Algorithm 1, is the better prediction), and the data cannot tell which setting
holds without spending privacy.

The candidates' weights are computed here with vectorized float solvers over a padded
(groups x levels) table (S2 of :mod:`.batch_weights`, and the S1, best-of and DROP rules
below, the same algorithms as :mod:`.weights`): only the *choice* comes from these floats;
the release then runs the chosen method's exact solver and exact noise. Every operation is
element-wise, a sequential ``cumsum`` along a row, or a max/min/argmin over a row, so one
group's figures do not depend on the other groups of the table nor on its padding: the
scalar finalize (a table of one group) and the batch finalize choose identically.

Privacy argument (replace-one neighbours; ε, n and the spec public):
  1. Every candidate is a central mechanism whose row i loses at most ε_i under the same
     replace-one neighbour model (the arguments of :mod:`hdp_spark.core.mean.finalize` and
     :mod:`hdp_spark.core.histogram.finalize`); the local-DP baselines are not candidates.
  2. The choice is a deterministic function of the group's ε histogram (levels and counts,
     public in this model) and of the spec's public parameters (bounds, categories, β): it
     reads no value and no category, draws no noise. It is therefore the same on neighbouring
     data sets, which differ in one row's value only.
  3. Given the choice, the release *is* the chosen method's release (same weights, same
     noise, same context), so for every neighbouring pair and every output set S,
     P[M(x) ∈ S] = P[M_c(x) ∈ S] <= e^{ε_i} P[M_c(x') ∈ S] = e^{ε_i} P[M(x') ∈ S] with c the
     common choice. Each row's guarantee is the chosen method's, and the published
     ``_method`` and predictions are functions of public facts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.mean.batch_weights import method_phi, padded, solve_clip_batch

__all__ = [
    "AUTO",
    "MEAN_CANDIDATES",
    "Figures",
    "LevelTable",
    "best_of",
    "choose_mean",
    "drop_phi_batch",
    "figures",
    "mean_candidate_errors",
    "mean_predictions",
    "solve_l1_batch",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

AUTO = "auto"
"""The method name that chooses per group."""

MEAN_CANDIDATES: tuple[str, ...] = (
    "adpm", "hpm-a", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "uniform", "proportional", "drop",
)
"""The mean's candidates, in tie-break order: every central method of ``hdp_mean`` (the
local-DP baselines ``ldp-*`` are left out: their error is larger by design)."""

_ADPM_C = 8.0


@dataclass(frozen=True, slots=True)
class LevelTable:
    """G groups' ε histograms as a padded (G x L) table (padding: v = 0, m = 0 at the end).

    Attributes:
        v: ε level per cell, ascending within a group's real cells.
        m: rows per cell (float: counts < 2**53 are exact).
        mask: real cells.
        n: rows per group.
    """

    v: FloatArray
    m: FloatArray
    mask: BoolArray
    n: FloatArray

    @classmethod
    def of(cls, offsets: IntArray, levels: FloatArray, counts: IntArray) -> LevelTable:
        """The table of flat cells (group g: ``[offsets[g], offsets[g + 1])``).

        Privacy:
            None: a change of layout of the public ε histograms.
        """
        vp, mask = padded(offsets, levels, 0.0)
        mi, _ = padded(offsets, counts, 0)
        m = mi.astype(np.float64)
        return cls(np.asarray(vp, dtype=np.float64), m, mask, _rowsum(m))

    @classmethod
    def single(cls, v: list[float], m: list[int]) -> LevelTable:
        """The table of one group."""
        return cls.of(np.array([0, len(v)], dtype=np.int64), np.array(v, dtype=np.float64),
                      np.array(m, dtype=np.int64))


def _rowsum(x: FloatArray) -> FloatArray:
    """Σ along each row, left to right (a sequential cumsum: padding zeros at the end
    change nothing, and no row depends on the table's width or on another row)."""
    if x.shape[1] == 0:
        return np.zeros(x.shape[0])
    out: FloatArray = np.cumsum(x, axis=1)[:, -1]
    return out


@dataclass(frozen=True, slots=True)
class Figures:
    """The float figures of one candidate's weights w = φ/Σmφ per group.

    Attributes:
        bias: ||w - 1/n||₁ / 2 (the worst reweighting error on a unit range).
        eta: max{w_l/ε_l : w_l > 0, ε_l finite} (the noise parameter).
        l2: ||w||₂².
        dev2: n·||w - 1/n||₂².
        trivial: no row may carry weight (data-independent output).
    """

    bias: FloatArray
    eta: FloatArray
    l2: FloatArray
    dev2: FloatArray
    trivial: BoolArray


def figures(t: LevelTable, phi: FloatArray) -> Figures:
    """:class:`Figures` of the weights φ/Σmφ of every group of ``t``.

    Privacy:
        None: a function of the public ε histograms.
    """
    m = t.m
    phi = np.where(t.mask, phi, 0.0)
    total = _rowsum(m * phi)
    trivial = ~(total > 0)
    safe = np.where(trivial, 1.0, total)
    w = phi / safe[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_n = np.where(t.n > 0, 1.0 / t.n, 0.0)
        dev = np.where(t.mask, w - inv_n[:, None], 0.0)
        bias = _rowsum(m * np.abs(dev)) / 2
        l2 = _rowsum(m * w * w)
        dev2 = t.n * _rowsum(m * dev * dev)
        eligible = (phi > 0) & np.isfinite(t.v) & (t.v > 0) & t.mask
        ratio = np.where(eligible, w / np.where(eligible, t.v, 1.0), 0.0)
    eta = ratio.max(axis=1) if ratio.shape[1] else np.zeros(ratio.shape[0])
    return Figures(bias, eta, l2, dev2, trivial)


def _public_only(t: LevelTable) -> FloatArray:
    return np.where(np.isinf(t.v) & t.mask, 1.0, 0.0)


def solve_l1_batch(t: LevelTable, log_factor: float) -> FloatArray:
    """φ of :func:`~hdp_spark.core.mean.weights.solve_l1` (solver S1) per group, in floats.

    The objective g(s) = 4·D(s)² + L²·s², D(s) = Σ m·(1/n - s·ε)_+ over the finite levels,
    is a convex quadratic on each segment between the breakpoints 1/(n·ε_l): there the
    deficit set (ε_l < 1/(n·s)) is a fixed prefix of the ascending levels, with N rows and
    P = Σ m·ε, so D = N/n - s·P and the minimum on the segment is the stationary point
    4NP/(n(L² + 4P²)) clipped to the segment and to [s_lo, s_hi]. The smallest over the
    segments is g's minimum. Then the same water-filling as the scalar solver.
    """
    v, m, mask, n = t.v, t.m, t.mask, t.n
    fin = np.isfinite(v)
    pos = (v > 0) & fin & (m > 0) & mask
    has_inf = (np.isinf(v) & (m > 0) & mask).any(axis=1)
    any_pos = pos.any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        finite_sum = _rowsum(np.where(pos, m * v, 0.0))
        s_lo = np.where(has_inf | ~any_pos, 0.0, 1.0 / finite_sum)
        eps_min = np.where(pos, v, math.inf).min(axis=1) if v.shape[1] else n
        s_hi = np.maximum(s_lo, 1.0 / (n * eps_min))
        zero = _rowsum(np.where((v <= 0) & mask, m, 0.0))
        big_n = zero[:, None] + np.cumsum(np.where(pos, m, 0.0), axis=1)
        big_p = np.cumsum(np.where(pos, m * v, 0.0), axis=1)
        pv = np.where(pos, v, math.inf)
        # the next positive level after each cell (inf: none)
        after = np.minimum.accumulate(pv[:, ::-1], axis=1)[:, ::-1]
        nxt = np.concatenate([after[:, 1:], np.full((v.shape[0], 1), math.inf)], axis=1)
        nn = n[:, None]
        seg_hi = 1.0 / (nn * pv)
        seg_lo = np.where(np.isinf(nxt), 0.0, 1.0 / (nn * nxt))
        first = after[:, 0] if v.shape[1] else np.full(v.shape[0], math.inf)
        # the segment with no positive level in deficit: s >= 1/(n·ε_first)
        lo0 = np.maximum(np.where(np.isinf(first), 0.0, 1.0 / (n * first)), s_lo)
        g0 = np.where(lo0 <= s_hi, 4 * (zero / n) ** 2 + log_factor**2 * lo0**2, math.inf)
        lo = np.maximum(seg_lo, s_lo[:, None])
        hi = np.minimum(seg_hi, s_hi[:, None])
        stat = 4 * big_n * big_p / (nn * (log_factor**2 + 4 * big_p**2))
        s = np.minimum(np.maximum(stat, lo), hi)
        d = np.maximum(big_n / nn - s * big_p, 0.0)
        g = np.where(pos & (lo <= hi), 4 * d * d + log_factor**2 * s * s, math.inf)
    g_all = np.concatenate([g0[:, None], g], axis=1)
    s_all = np.concatenate([lo0[:, None], s], axis=1)
    best = np.argmin(g_all, axis=1)
    s_star = s_all[np.arange(v.shape[0]), best]
    # water-filling: the first level (ascending cap s*·ε) with cap >= the remaining
    # mass per remaining row; λ is that quotient
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        caps = np.where(fin, s_star[:, None] * v, math.inf)
        live = (m > 0) & mask
        used = np.where(live, m * caps, 0.0)
        rows = np.where(live, m, 0.0)
        mass = np.concatenate([np.zeros((v.shape[0], 1)), np.cumsum(used, axis=1)[:, :-1]],
                              axis=1)
        taken = np.concatenate([np.zeros((v.shape[0], 1)), np.cumsum(rows, axis=1)[:, :-1]],
                               axis=1)
        cand = (1.0 - mass) / (nn - taken)
        hit = live & (caps >= cand)
        found = hit.any(axis=1)
        at = np.argmax(hit, axis=1)
        lam = np.where(found, cand[np.arange(v.shape[0]), at], math.inf)
        tau = lam / s_star
        capped = np.where(v > 0, np.minimum(v, tau[:, None]), 0.0)
        phi = np.where(found[:, None], capped, np.maximum(v, 0.0))
    ok = any_pos & (s_star > 0)
    return np.where(ok[:, None], phi, _public_only(t))


def drop_phi_batch(t: LevelTable, log_factor: float) -> FloatArray:
    """φ of :func:`~hdp_spark.core.mean.weights.drop_phi` (DROP-t) per group, in floats:
    the cut over levels minimizing (2(n - K)/n)² + L²·η², K the rows kept, η = 1/(K·ε_keep).
    """
    v, m, mask, n = t.v, t.m, t.mask, t.n
    live = (m > 0) & mask
    keepable = live & (v > 0)
    suffix_k = np.cumsum(np.where(keepable, m, 0.0)[:, ::-1], axis=1)[:, ::-1]
    finite_keep = np.where(keepable & np.isfinite(v), v, math.inf)
    eps_keep = np.minimum.accumulate(finite_keep[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = np.where(np.isinf(eps_keep), 0.0, 1.0 / (suffix_k * eps_keep))
        nn = n[:, None]
        obj = np.where(live & (suffix_k > 0),
                       (2 * (nn - suffix_k) / nn) ** 2 + log_factor**2 * eta**2, math.inf)
    best = np.argmin(obj, axis=1) if v.shape[1] else np.zeros(v.shape[0], np.int64)
    any_cut: BoolArray = np.asarray(np.isfinite(obj).any(axis=1))
    keep = (np.arange(v.shape[1])[None, :] >= best[:, None]) & (v > 0) & mask
    return np.where(any_cut[:, None] & keep, 1.0, 0.0)


def best_of(t: LevelTable, log_factor: float) -> FloatArray:
    """φ of :func:`~hdp_spark.core.mean.weights.best_of_solvers`: S1(L) or S2(c = L),
    whichever has the smaller r_WC² = min(||w - 1/n||₁², L·||w||₂²) + L²·η²."""
    pa = solve_l1_batch(t, log_factor)
    pb, _ = solve_clip_batch(t.v, t.m, log_factor)
    fa, fb = figures(t, pa), figures(t, pb)

    def objective(f: Figures) -> FloatArray:
        return np.minimum((2 * f.bias) ** 2, log_factor * f.l2) + log_factor**2 * f.eta**2

    return np.where((objective(fa) <= objective(fb))[:, None], pa, pb)


def mean_phi(method: str, t: LevelTable, beta: float) -> FloatArray:
    """φ of one mean candidate per group (float figures of the method's weights)."""
    log_pac = math.log(1.0 / beta)
    if method in ("adpm", "hpm-a", "uniform", "proportional"):
        phi, _ = method_phi(method, t.v, t.m)
        return phi
    if method in ("hpm-cp", "hpm-ce"):
        return solve_l1_batch(t, log_pac if method == "hpm-cp" else 1.0)
    if method in ("hpm-wp", "hpm-we"):
        return best_of(t, log_pac if method == "hpm-wp" else 1.0)
    return drop_phi_batch(t, log_pac)


def mean_predictions(t: LevelTable, beta: float) -> FloatArray:
    """Predicted worst-case MSE on a unit range, (candidates x groups), in the order of
    :data:`MEAN_CANDIDATES` (multiply by (upper - lower)² for data units).

    Privacy:
        None: a function of the public ε histograms and β (module docstring).
    """
    out = np.empty((len(MEAN_CANDIDATES), t.v.shape[0]))
    for i, method in enumerate(MEAN_CANDIDATES):
        f = figures(t, mean_phi(method, t, beta))
        pred = f.bias**2 + 2 * f.eta**2
        if method == "adpm":  # the data-independent fallback of ISIT Alg. 1
            pred = np.where(f.l2 / 4 + 2 * f.eta**2 > 0.25, 0.25, pred)
        out[i] = np.where(f.trivial | ~(t.n > 0), 0.25, pred)
    return np.where(np.isnan(out), math.inf, out)


def choose_mean(t: LevelTable, beta: float) -> IntArray:
    """Index into :data:`MEAN_CANDIDATES` of each group's choice: the least predicted
    error, ties to the first candidate.

    Privacy:
        None: a function of the public ε histograms and β (module docstring).
    """
    out: IntArray = np.argmin(mean_predictions(t, beta), axis=0).astype(np.int64)
    return out


def mean_candidate_errors(v: list[float], m: list[int], beta: float, span: float
                          ) -> tuple[tuple[str, float], ...]:
    """(candidate, predicted worst-case RMSE in data units) for one group, in tie-break
    order (``span`` = upper - lower).

    Privacy:
        None: a function of the public ε histogram, the bounds and β.
    """
    pred = mean_predictions(LevelTable.single(v, m), beta)[:, 0]
    return tuple((c, span * math.sqrt(float(p))) for c, p in zip(MEAN_CANDIDATES, pred,
                                                                  strict=True))
